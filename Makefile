# Set-up and entry points. `make test` and `make demo` each do the whole set-up on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.ttgnn-installed
SOURCES := pyproject.toml setup.py ttgnn/_build.py requirements.txt $(wildcard kernels/*.cpp kernels/*.h kernels/*/*.cpp kernels/*/*.cu \
           kernels/*/*.cuh kernels/*/*.h)

.PHONY: setup test demo dist check-packaging clean

setup: $(STAMP)

$(STAMP): $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-build-isolation -e .
	touch $(STAMP)

# Two workers (pytest-xdist), each test sent to the first free one: a test that starts Python
# processes spends seconds importing torch on one core, while the other worker computes.
test: setup
	$(PY) -m pytest -q -n 2 --dist worksteal tests

# sdist and wheel in dist/, built by setuptools' PEP 517 hooks in the pinned venv (no build isolation,
# nothing downloaded): the wheel holds ttgnn._C compiled for the pinned torch (a few minutes) and its
# build record. A plain `pip install .` builds the pure wheel instead (kernels compiled on first use).
dist: setup
	rm -rf dist
	$(PY) -c "from setuptools import build_meta as b; b.build_sdist('dist'); b.build_wheel('dist')"
	ls -l dist

# The packaging checks alone (also part of `make test`): sdist and wheel contents, and the wheel
# installed into a fresh venv that shares the pinned torch.
check-packaging: setup
	$(PY) -m pytest -q tests/test_packaging.py

# The main job: a featureless GAT with a 1,118x-compressed TT embedding on ogbn-arxiv, with every
# setting at its default (TT rank 8, known training labels as inputs, spread over the graph and fed
# back once as predictions, 200 epochs): the README's first row, about 40 minutes on 2 cores.
# Data: $TTGNN_DATA, else ./dataset; when absent, ogb downloads it into ~/.cache/ttgnn.
demo: setup
	$(VENV)/bin/ttgnn train --dataset ogbn-arxiv --output-dir runs/demo --no-progress

clean:
	rm -rf build dist *.egg-info ttgnn/_C*.so ttgnn/_C.build.json
