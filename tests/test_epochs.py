"""`run.epochs > 1`: every method applies each epoch's play of a task as a new episode (`cove.core.EpisodeKeys`), tiny
model."""
import json, os, sqlite3, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')
EPOCHS, EPISODES = 3, 2

def _run(out, method):
    cmd = [COVE, 'run', '--method', method, '--tasks', 'math', '--episodes', str(EPISODES), '--model', 'tiny',
           '--set', f'run.epochs={EPOCHS}', '--set', 'model.batch_size=2', '--set', 'model.max_new_tokens=8',
           '--set', 'trigger.k=100', '--set', 'evolver.cold_start=false', '--set', 'evolver.train_every=0',
           '--out', str(out), '--quiet']   # no parametric update: this is about the episode bookkeeping
    r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, 'OMP_NUM_THREADS': '1'}, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    recs = [json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines() if l.strip()]
    assert sorted(r['epoch'] for r in recs) == sorted(e for e in range(EPOCHS) for _ in range(EPISODES))
    return recs

def _keys(db, table):
    con = sqlite3.connect(db)
    try: return [r[0] for r in con.execute(f'SELECT key FROM {table}')]
    finally: con.close()

def _per_epoch(keys):
    "How many applied keys carry each occurrence `#n` (n = the epoch)."
    return sorted(int(k.rsplit('#', 1)[1]) for k in keys)

WANT = sorted(e for e in range(EPOCHS) for _ in range(EPISODES))   # 2 episodes applied in each of 3 epochs

def test_cove_applies_every_epoch(tmp_path):
    recs = _run(tmp_path, 'cove')
    st = json.loads((tmp_path/'workflow_state.json').read_text())
    assert _per_epoch(st['applied']) == WANT, sorted(st['applied'])        # before: epochs 2 and 3 were skipped
    # routed (and seen by the trigger) every epoch
    assert len(st['router']['log']) == EPOCHS * EPISODES
    assert all(r['channel'] for r in recs)

def test_evolver_applies_every_epoch(tmp_path):
    recs = _run(tmp_path, 'evolver')
    # before: one row per task, later epochs dropped
    assert _per_epoch(_keys(tmp_path/'evolver.sqlite', 'episodes')) == WANT
    assert all(r['reward'] is not None for r in recs)

def test_memrl_applies_every_epoch(tmp_path):
    _run(tmp_path, 'memrl')
    assert _per_epoch(_keys(tmp_path/'memrl.sqlite', 'applied')) == WANT
    con = sqlite3.connect(tmp_path/'memrl.sqlite')
    n, intents = con.execute('SELECT COUNT(*), COUNT(DISTINCT intent_id) FROM memories').fetchone(); con.close()
    # each epoch's memory joins its task's intent (before: a new copy each epoch)
    assert (n, intents) == (EPOCHS * EPISODES, EPISODES)

def test_coevo_applies_every_epoch(tmp_path):
    recs = _run(tmp_path, 'coevo')
    assert _per_epoch(_keys(tmp_path/'coevo.sqlite', 'applied')) == WANT
    assert not any(r.get('coevo_replay') for r in recs)
