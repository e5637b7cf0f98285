"""Package-level tests of `cove.train` that need several processes: data-parallel training under torchrun, and a kill
while saving."""
import json, os, signal, subprocess, sys
from pathlib import Path
import pytest

ENV = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'TOKENIZERS_PARALLELISM': 'false',
       'OMP_NUM_THREADS': '1'}
ARGS = ['--model', 'tiny', '--family', 'math', '--max-steps', '2', '--batch-size', '2']


def _run(cmd, timeout=300):
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    return r, f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"


def _dataset_tokens(n):
    "Tokens of the tokenised reference conversations of the first `n` arithmetic train tasks (what `main` trains on)."
    from cove.llm import smollm2_tokenizer
    from cove.tasks.base import make_env
    from cove.train import reference_sft, sft_dataset
    env = make_env('math')
    return sum(map(len, sft_dataset(reference_sft(env, env.tasks('train', n=n)), smollm2_tokenizer(),
                                    512)['input_ids']))


def test_torchrun_two_processes(tmp_path):
    """`torchrun --nproc_per_node 2` on CPU (gloo): the trainer sees world size 2, one adapter is saved, every token
    counted once."""
    out = tmp_path/'ddp'
    cmd = [sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', '2', '-m', 'cove.train',
           *ARGS, '--tasks', '8', '--out', str(out), '--result', str(out/'result.json')]
    r, log = _run(cmd)
    assert r.returncode == 0, log
    res = json.loads((out/'result.json').read_text())
    assert res['world_size'] == 2, log
    assert res['steps'] == 2 and res['method'] == 'sft'
    # 8 conversations, 2 ranks x batch 2: two steps are exactly one pass over the data, each conversation counted once
    # (with an uneven split, accelerate completes the last batch with conversations from the start, and counts them)
    assert res['train_tokens'] == _dataset_tokens(8)
    # one adapter, no leftovers
    assert sorted(p.name for p in out.iterdir() if 'adapter' in p.name) == ['adapter-0001']
    assert (out/'adapter-0001'/'adapter_config.json').exists()
    assert json.loads((out/'adapter-0001'/'update.json').read_text())['world_size'] == 2


KILL_WHILE_SAVING = """
import os, signal, sys
from peft import PeftModel
_save = PeftModel.save_pretrained
def save_then_die(self, *a, **k):
    _save(self, *a, **k)                   # the adapter weights are on disk ...
    os.kill(os.getpid(), signal.SIGKILL)   # ... and the process dies before the folder is published
PeftModel.save_pretrained = save_then_die
from cove.train import main
main(sys.argv[1:])
"""


def test_kill_while_saving_leaves_no_half_adapter(tmp_path):
    """SIGKILL in the middle of saving: no `adapter-0001`, only a hidden temporary folder, which the next update
    replaces."""
    out = tmp_path/'kill'
    r, log = _run([sys.executable, '-c', KILL_WHILE_SAVING, *ARGS, '--tasks', '2', '--out', str(out)])
    assert r.returncode == -signal.SIGKILL, log
    assert not (out/'adapter-0001').exists()
    assert (out/'.adapter-0001.tmp'/'adapter_config.json').exists()   # what the kill left: hidden, never loaded
    r, log = _run([sys.executable, '-m', 'cove.train', *ARGS, '--tasks', '2', '--out', str(out)])
    assert r.returncode == 0, log
    assert sorted(p.name for p in out.iterdir() if 'adapter' in p.name) == ['adapter-0001']
    assert (out/'adapter-0001'/'update.json').exists()
