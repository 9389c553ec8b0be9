# okl developer entry points. `make test` and `make run` set up the virtual environment first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-okl

.PHONY: setup run test test-all bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,molecules]"
	touch $(STAMP)

## run: train the default model on the built-in synthetic data set (no download)
run: setup
	$(PY) -m pipelines.train --runner=DirectRunner

## test: the fast suite; slow tests run too when CI=true or OKL_RUN_SLOW=1
test: setup
	$(PY) -m pytest -q $(PYTEST_ARGS)

## test-all: every test, slow ones included
test-all: setup
	OKL_RUN_SLOW=1 $(PY) -m pytest -q $(PYTEST_ARGS)

## bench: the benchmarks in bench/ (ratios measured in one process)
bench: setup
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
