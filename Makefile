# Convenience wrappers around ./dev (which is what the README documents).
.PHONY: run test bench lint setup
run:
	./dev run
test:
	./dev test
bench:
	./dev bench
lint:
	./dev lint
setup:
	./dev setup
