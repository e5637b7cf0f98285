"Package-level tests of `cove.llm` that are awkward in a notebook: killing a conversion half-way."
import os, signal, subprocess, sys, time
from pathlib import Path
import pytest
from cove.models import EMBEDDED_DIR, embedded_cache_path, is_embedded_cached

CONVERT = "from cove.models import ensure_embedded_model; ensure_embedded_model()"


def _leftovers(models: Path): return sorted(models.glob(f'.{EMBEDDED_DIR}-tmp-*'))


def test_killed_conversion_leaves_no_half_cache(tmp_path):
    "SIGKILL while the converted model is being written: the cache folder must not exist (only a hidden temp folder)."
    env = {**os.environ, 'COVE_CACHE_DIR': str(tmp_path), 'HF_HUB_OFFLINE': '1', 'OMP_NUM_THREADS': '1'}
    models = tmp_path/'models'
    p = subprocess.Popen([sys.executable, '-c', CONVERT], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and p.poll() is None and not _leftovers(models): time.sleep(0.05)
        assert p.poll() is None, "conversion finished before it could be killed"
        assert _leftovers(models), "no temporary folder appeared within 300 s"
        time.sleep(0.3)  # let it write part of the checkpoint
        p.send_signal(signal.SIGKILL); p.wait(30)
    finally:
        if p.poll() is None: p.kill()
    assert not embedded_cache_path(models).exists()
    assert not is_embedded_cached(models)
    assert _leftovers(models)  # the half-written temp folder is what a kill leaves; the next conversion removes it


def test_cache_dir_env(tmp_path, monkeypatch):
    "`COVE_CACHE_DIR` moves the model cache."
    from cove.models import model_cache_dir
    monkeypatch.setenv('COVE_CACHE_DIR', str(tmp_path))
    assert model_cache_dir() == tmp_path/'models'
    assert embedded_cache_path() == tmp_path/'models'/EMBEDDED_DIR
