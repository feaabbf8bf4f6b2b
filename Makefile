# Set-up and entry points. `make test` and `make demo` each do the whole set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ttgnn-installed
SOURCES := pyproject.toml setup.py requirements.txt $(wildcard kernels/*.cpp kernels/*.h kernels/*/*.cpp kernels/*/*.cu kernels/*/*.h)

.PHONY: setup test demo clean

setup: $(STAMP)

$(STAMP): $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-build-isolation -e .
	touch $(STAMP)

test: setup
	$(PY) -m pytest -q tests

demo: setup
	$(PY) examples/tt_embedding_demo.py

clean:
	rm -rf build *.egg-info ttgnn/_C*.so
