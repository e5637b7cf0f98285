"""tools/gpu_smoke.py's steps, run on CPU with the tiny model (the GPU run itself needs a GPU machine)."""
import json, os, subprocess, sys
from pathlib import Path
import torch
from cove.llm import tiny_llama

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_smoke_steps_run_on_cpu(tmp_path):
    model, tok = tiny_llama(0)
    model.to(torch.bfloat16).save_pretrained(tmp_path/'tiny')
    tok.save_pretrained(tmp_path/'tiny')
    env = os.environ | {'OMP_NUM_THREADS': '1'}
    p = subprocess.run([sys.executable, 'tools/gpu_smoke.py', '--device', 'cpu', '--model', str(tmp_path/'tiny'),
                        '--out', str(tmp_path/'out')], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    figs = json.loads((tmp_path/'out'/'gpu_smoke.json').read_text())
    assert list(figs) == ['env', 'generate', 'sft', 'grpo', 'run']
    assert figs['generate']['new_tokens'] == 32 * 64 and figs['generate']['gen_tokens_per_s'] > 0
    assert figs['sft']['steps'] == 4 and figs['sft']['train_tokens_per_s'] > 0
    assert figs['grpo']['steps'] == 2 and figs['grpo']['reward_calls'] == 8
    assert figs['run']['episodes'] == 4
    assert 'SMOKE done: 5 of 5 steps passed' in p.stdout


def test_gpu_smoke_says_what_is_missing(tmp_path):
    p = subprocess.run([sys.executable, 'tools/gpu_smoke.py', '--device', 'cpu', '--model', str(tmp_path/'none'),
                        '--out', str(tmp_path/'out')], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and 'tools/gpu_smoke.sh prepare' in p.stdout
