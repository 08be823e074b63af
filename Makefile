# Convenience wrappers around ./dev (which is what the README documents).
.PHONY: run test bench lint setup screenshots
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
screenshots:
	./dev screenshots --out build/screenshots
