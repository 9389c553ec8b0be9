# okl developer entry points. `make test` and `make run` set up the virtual environment first.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-okl
# What `make run` needs: okl and its runtime dependencies only (no test or molecule extras).
RUN_STAMP := $(VENV)/.installed-okl-run
# The Flink job server's Beam version is older than .venv's: its jobs are submitted from a
# second environment with that apache-beam (pipelines/local_runners.py, FLINK_BEAM_VERSION).
FLINK_VENV ?= .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed-okl

.PHONY: setup run runners flink-venv flink-cluster flink-cluster-stop typecheck docs test test-all bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,molecules]"
	touch $(STAMP) $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $(RUN_STAMP)

## runners: Prism (needs Go) and a Flink job server (needs Java + Maven) in ~/.cache/okl/runners
## (or $$OKL_CACHE/runners), and .venv-flink to submit Flink jobs; a part whose tools are
## missing is skipped with a note (its tests then skip)
runners: setup
	$(PY) -m pipelines.engines install prism --if_available
	$(PY) -m pipelines.engines install flink --if_available
	@if $(PY) -m pipelines.engines path flink >/dev/null 2>&1; then $(MAKE) --no-print-directory flink-venv; \
	else echo "runners: no Flink job server, so no $(FLINK_VENV) (the Flink tests skip)"; fi

flink-venv: $(FLINK_STAMP)

$(FLINK_STAMP): pyproject.toml pipelines/local_runners.py
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install -q --upgrade pip
	$(FLINK_VENV)/bin/python -m pip install -q -e ".[dev]" \
	    "apache-beam==$$($(PY) -c 'from pipelines.local_runners import FLINK_BEAM_VERSION; print(FLINK_BEAM_VERSION)')"
	touch $(FLINK_STAMP)

## flink-cluster: a local Flink session cluster (a JobManager, 2 TaskManagers, their Beam worker pools; separate
## processes) for jobs submitted from $(FLINK_VENV) with the flags it prints; flink-cluster-stop stops it
flink-cluster: runners
	$(VENV)/bin/okl engines start flink-cluster --taskmanagers 2

flink-cluster-stop: setup
	$(VENV)/bin/okl engines stop flink-cluster

## run: train the default model on the built-in synthetic data set (no download); installs only
## what the run needs (`make setup` / `make test` add the dev and molecules extras)
run: $(RUN_STAMP)
	$(VENV)/bin/okl train --runner=DirectRunner --overwrite

# The Beam-facing tests, run again in .venv-flink: apache-beam's lower bound (pyproject.toml).
LOWER_BOUND_TESTS := tests/transforms tests/pipelines/test_train.py tests/pipelines/test_runners.py \
    tests/pipelines/test_rounds.py tests/pipelines/test_predict.py tests/pipelines/test_dead_letter.py

## typecheck: mypy on okl_core, okl_experiments, transforms and pipelines (settings in pyproject.toml)
typecheck: setup
	$(PY) -m mypy okl_core okl_experiments transforms pipelines

## docs: the documentation site (mkdocs.yml, docs/, API reference from the docstrings) into
## build/site, warnings as errors
docs: setup
	$(PY) -m mkdocs build --strict --quiet

## test: the type check, the docs build, the fast suite (and the Beam-facing tests on the lowest supported Beam,
## in .venv-flink); slow tests run too when CI=true or OKL_RUN_SLOW=1
# The suite runs on TEST_WORKERS processes (pytest-xdist), a test module on one of them (its
# module-scoped engines, such as the Flink session cluster, start once): many tests mostly wait
# on subprocesses, JVMs and streams.
TEST_WORKERS ?= 2
XDIST = -n $(TEST_WORKERS) --dist loadfile

test: setup runners typecheck docs
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)
	@if [ -x $(FLINK_VENV)/bin/python ]; then \
	    echo "== the same Beam-facing tests on apache-beam $$($(FLINK_VENV)/bin/python -c 'import apache_beam; print(apache_beam.__version__)') (lower bound)"; \
	    $(FLINK_VENV)/bin/python -m pytest -q $(XDIST) -p no:cacheprovider --disable-warnings -m "not prism and not flink" $(LOWER_BOUND_TESTS); \
	else echo "test: no $(FLINK_VENV): the lower bound of apache-beam was not tested"; fi

## test-all: every test, slow ones included
test-all: setup runners typecheck
	OKL_RUN_SLOW=1 $(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

## bench: the benchmarks in bench/ (ratios measured in one process)
bench: setup
	for b in bench/bench_*.py; do m=$$(basename $$b .py); echo "== python -m bench.$$m"; $(PY) -m bench.$$m || exit 1; done

clean:
	rm -rf $(VENV) $(FLINK_VENV) .pytest_cache build *.egg-info
