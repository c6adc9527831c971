# Two set-up commands: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REPRO := $(VENV)/bin/repro

.PHONY: demo test bench clean-venv

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	# evalai pins packages that do not install on Python 3.11; its submission code needs only the
	# packages listed in pyproject.toml, so the client itself goes in without its pins.
	$(PY) -m pip install -q --no-deps evalai==1.3.18
	$(PY) -m pip install -q -e '.[test]'
	touch $@

demo: $(VENV)/.installed
	$(REPRO) list
	$(REPRO) table table5-ablation

test: $(VENV)/.installed
	$(PY) -m pytest -q

bench: $(VENV)/.installed
	$(PY) -m benchmarks

clean-venv:
	rm -rf $(VENV)
