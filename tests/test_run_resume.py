"`cove run` resumes after `kill -9`: no duplicate and no lost episodes (tiny model, so it is quick)."
import json, os, signal, subprocess, sys, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _cmd(out, method='base', episodes=6):
    return [COVE, 'run', '--method', method, '--tasks', 'math,multihop', '--episodes', str(episodes), '--model', 'tiny',
            '--set', 'model.batch_size=2', '--set', 'model.max_new_tokens=8', '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def test_resume_after_kill(tmp_path):
    out = tmp_path/'run'
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    kills = 0
    for attempt in range(3):   # kill it mid-run a few times, as soon as it has written a new episode
        p = subprocess.Popen(_cmd(out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n0 = len(_episodes(out))
        deadline = time.time() + 120
        # kill right after the new batch
        while time.time() < deadline and p.poll() is None and len(_episodes(out)) <= n0: time.sleep(0.02)
        if p.poll() is None: p.send_signal(signal.SIGKILL); kills += 1
        p.wait()
    assert kills >= 1 and len(_episodes(out)) < 12, "the run was never interrupted: this test would prove nothing"
    r = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    eps = [e['episode'] for e in _episodes(out)]
    assert sorted(eps) == list(range(12)), eps          # 2 families x 6 episodes, each exactly once
    m = json.loads((out/'metrics.json').read_text())
    assert m['overall']['n'] == 12 and set(m['per_family']) == {'math', 'multihop'}
    for e in _episodes(out):
        assert {'episode', 'task_id', 'family', 'split', 'method', 'status', 'success', 'score', 'prompt_tokens',
                'completion_tokens', 'retrieved', 'channel', 'api_correct', 'elapsed_s'} <= set(e)

def test_rerun_finished_run_adds_nothing(tmp_path):
    out = tmp_path/'run'
    for _ in range(2):
        r = subprocess.run(_cmd(out, 'oracle', 3), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-3000:]
    assert [e['episode'] for e in _episodes(out)] == list(range(6))

def test_bad_input_is_a_clear_error(tmp_path):
    r = subprocess.run([COVE, 'run', '--method', 'base', '--tasks', 'chess', '--episodes', '1', '--out',
                        str(tmp_path/'x')],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and 'unknown task family' in r.stderr
    r = subprocess.run([COVE, 'run', '--method', 'nope', '--tasks', 'math', '--episodes', '1', '--out',
                        str(tmp_path/'y')],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and 'unknown method' in r.stderr

def test_torn_last_line_does_not_swallow_the_replayed_episode(tmp_path):
    """Issue 14 item 1: cut the last 40 bytes off episodes.jsonl (a kill mid-write), rerun: every episode is there once,
    the torn bytes kept."""
    import os, subprocess, sys
    cove = str(Path(sys.executable).parent/'cove'); out = tmp_path/'R'
    cmd = [cove, 'run', '--method', 'base', '--tasks', 'tableqa,math', '--episodes', '2', '--model', 'tiny', '--seed',
           '3', '--set', 'model.max_new_tokens=8', '--out', str(out), '--quiet']
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    assert subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300).returncode == 0
    p = out/'episodes.jsonl'; data = p.read_bytes(); p.write_bytes(data[:-40])
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = p.read_text().splitlines()
    # before: the replay was glued onto the torn line
    recs = [json.loads(l) for l in lines]
    assert sorted(x['episode'] for x in recs) == list(range(4))
    assert (out/'episodes.jsonl.torn').read_bytes() == data[data[:-40].rfind(b'\n') + 1:-40] + b'\n'
