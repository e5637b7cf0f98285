"""Issue 41: the demo plays on vLLM where the engine probe chose it (issue 54: measured once per machine and kept);
a server that does not start is said (log, table header, summary) and the rollouts go to hf, unless `--engine vllm`
asked for it."""
import pytest
import cove.bench as bench
from cove.demo import run_demo, demo_config
from cove.serve import ServeError

@pytest.fixture
def broken_vllm(tmp_path, monkeypatch):
    "A vLLM venv whose python exits at once, as a broken install would."
    py = tmp_path/'venv'/'bin'/'python'
    py.parent.mkdir(parents=True)
    py.write_text('#!/bin/sh\necho "no vllm in this venv" >&2\nexit 3\n')
    py.chmod(0o755)
    monkeypatch.setenv('COVE_VLLM_VENV', str(py.parent.parent))

_CFG = demo_config(env={}, sets=['run.drift=', 'model.dtype=float32'], episodes=1)   # fp32: vLLM's

def _demo(out, **kw):
    return run_demo(_CFG, out, episodes=1, methods=['base'], families=['math'], progress=False, **kw)

@pytest.fixture
def chose_vllm(tmp_path, monkeypatch):
    "A probe record of this machine that chose vLLM (measured when its install still worked)."
    f = tmp_path/'engine-probe.json'
    monkeypatch.setattr(bench, 'probe_file', lambda: f)
    bench._keep_probe(f, bench.probe_key(_CFG, ['hf', 'vllm']), dict(engine='vllm', measured=True, when='earlier',
                                                                      why='vllm 78.3 episodes a minute'))

def test_a_server_that_does_not_start_is_said_then_hf(broken_vllm, chose_vllm, tmp_path):
    s = _demo(tmp_path/'demo')
    assert 'chosen by the engine probe (kept in' in s['engine_why'] and 'vllm 78.3' in s['engine_why']
    assert s['engine'] == 'hf' and s['engine_note'] == 'vLLM did not start: vllm.log'
    head = (tmp_path/'demo'/'table.md').read_text()
    assert 'Rollouts on hf (vLLM did not start: vllm.log). The engine: chosen by the engine probe' in head
    assert 'vLLM did not start, so the rollouts run on hf' in (tmp_path/'demo'/'demo.log').read_text()
    assert 'no vllm in this venv' in (tmp_path/'demo'/'vllm.log').read_text()
    assert s['rows'][0]['episodes'] == 1

def test_asked_for_vllm_fails_in_one_line(broken_vllm, tmp_path):
    with pytest.raises(ServeError, match='no vllm in this venv|exited'): _demo(tmp_path/'demo', engine='vllm')
