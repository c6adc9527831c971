# Two set-up commands: `make demo` and `make test` (`make test-fast` leaves the slow tests out). Each creates
# .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
REPRO := $(VENV)/bin/repro

.PHONY: demo test test-fast test-gpu lint docs bench clean-venv wordnet

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q --no-warn-conflicts -e '.[test]'
	# evalai pins packages that do not install on Python 3.11; its submission code needs only the
	# packages listed in pyproject.toml, so the client itself goes in last, without its pins. pip's
	# conflict report about those pins (an `ERROR:` line that reads as a failed install) is left out.
	@echo "pip: evalai 1.3.18 goes in without its pins on purpose (they do not install on Python 3.11)"
	$(PY) -m pip install -q --no-deps evalai==1.3.18
	touch $@

# The demo trains three rows of mcan-pa Table V on the synthetic scale, one seed each (about ten
# minutes on 2 idle cores; CPU-bound, so longer on a loaded machine), into a scratch results folder
# (.demo/results), prints those three rows, then the committed table (4-10 seeds a row) beside them, and draws
# the table (reported vs reproduced, the claims, the demo's training curves) and one attention map.
DEMO_RESULTS ?= .demo/results
DEMO_ROWS ?= MCAN,MCAN+POA,MCAN+PA (ours)
DEMO_PLOT ?= .demo/table5-synthetic.png
DEMO_ATTENTION ?= .demo/attention.png

# matplotlib, for repro plot and repro attention: the optional `plot` extra (the demo draws with it, the
# tests of plots and attention maps need it)
$(VENV)/.plot: $(VENV)/.installed
	$(PY) -m pip install -q --no-warn-conflicts -e '.[plot]'
	touch $@

demo: $(VENV)/.installed $(VENV)/.plot
	@echo "== repro: mcan-pa Table V at the synthetic scale: rows $(DEMO_ROWS), seed 0 (a few minutes)"
	REPRO_RESULTS=$(DEMO_RESULTS) $(REPRO) run mcan-pa-table5-ablation --scale synthetic --rows "$(DEMO_ROWS)" --seeds 0 --force
	@echo "== repro: THIS DEMO's rows ($(DEMO_ROWS); seed 0, from $(DEMO_RESULTS); rows it did not train show –)"
	REPRO_RESULTS=$(DEMO_RESULTS) $(REPRO) table mcan-pa-table5-ablation --scale synthetic
	@echo "== repro: the COMMITTED table, for comparison (all 10 rows, 4-10 seeds each under its design, mean ± std; results/)"
	$(REPRO) table mcan-pa-table5-ablation --scale synthetic
	$(REPRO) attention mcan-pa-table5-ablation --row "MCAN+PA (ours)" --question 6003 --scale synthetic -o $(DEMO_ATTENTION)
	$(REPRO) plot mcan-pa-table5-ablation --scale synthetic -o $(DEMO_PLOT)
	@echo "== repro: the figure of Table V at the synthetic scale (reported vs reproduced, claims, curves) is $(DEMO_PLOT)"

# `make test` runs every test, the slow ones included, in TEST_WORKERS processes (pytest-xdist; an idle worker takes
# tests queued for a busy one). TEST_WORKERS=0 runs them in this one process. GPU tests skip without CUDA. The
# 25 slowest tests are listed at the end: the suite is meant to stay under ten minutes on 2 idle cores.
TEST_WORKERS ?= 2
test: $(VENV)/.installed $(VENV)/.plot wordnet lint docs
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=25

# The inner loop: every test but those marked slow (synthetic-scale regression reruns, seeds trained together,
# torchrun/DDP and paper-scale workers, anything over about 10 s). Run `make test` before committing.
test-fast: $(VENV)/.installed $(VENV)/.plot wordnet
	$(PY) -m pytest -q -m "not slow"

# On a machine with CUDA: the tests marked gpu (every model kind's smoke rows on the GPU in fp32 and bf16, seeds
# trained together, a resumed run, fp16 with its grad scaler, a --limit paper-scale run on official-layout files,
# released weights evaluated, GLPN's depth maps, two NCCL ranks under torchrun where two GPUs are present), then
# bench_train there in the recipes' fp32 (the trainer compiles nothing), and bench_gpu_ensemble (MCAN's seeds
# together against one at a time). Without CUDA the tests skip and the benchmarks stop with one line.
test-gpu: $(VENV)/.installed
	$(PY) -m pytest -q -m gpu -n $(TEST_WORKERS) tests/test_gpu_runs.py
	$(PY) -m benchmarks.bench_train --device cuda --precision fp32 --steps 20 --warmup 3
	$(PY) -m benchmarks.bench_gpu_ensemble --together 4,8 --steps 15 --warmup 4

# ruff: the linter and the formatter, configured in pyproject.toml; the tree is kept clean.
lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The documentation site (mkdocs.yml, docs/): a strict build, so that a broken link between pages, an anchor that is
# not there or a page left out of the nav fails; built into a temporary folder, removed after.
docs: $(VENV)/.installed
	@site=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -q -d "$$site"; \
		status=$$?; rm -rf "$$site"; [ $$status = 0 ] && echo "docs: mkdocs build --strict passed"; exit $$status

# WordNet 3.0 for the WUPS tests: Debian's wordnet-base (/usr/share/wordnet). Idempotent: nothing
# happens when the files are there; installs only as root with apt-get; otherwise says why and
# the WUPS tests skip with the same reason.
wordnet:
	@if [ -f /usr/share/wordnet/data.noun ]; then \
		echo "wordnet: /usr/share/wordnet present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		(apt-get install -y -q --no-install-recommends wordnet-base >/dev/null 2>&1 \
		 || (apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends wordnet-base >/dev/null)) \
		&& echo "wordnet: installed wordnet-base"; \
	else \
		echo "wordnet: skipped (not root or no apt-get); WUPS tests will skip. Get it with 'repro download wordnet'"; \
	fi

bench: $(VENV)/.installed
	$(PY) -m benchmarks

clean-venv:
	rm -rf $(VENV)
