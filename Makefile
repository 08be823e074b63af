# Shortcuts for ./dev (which sets up .venv on first use).
.PHONY: run test bench lint screenshots

run:
	./dev run

test:
	./dev test

bench:
	./dev bench

lint:
	./dev lint

screenshots:
	./dev screenshots --out build/screenshots
