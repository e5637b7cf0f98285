"""Issue 24, item 4: a resume compares the whole effective config, refuses foreign records, and lets an empty folder be
re-specified."""
import json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _run(out, *sets, method='oracle', episodes=4):
    cmd = [COVE, 'run', '--method', method, '--tasks', 'math', '--episodes', str(episodes), '--out', str(out),
           '--quiet']
    for s in sets: cmd += ['--set', s]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)

def _recs(out): return [json.loads(l) for l in (Path(out)/'episodes.jsonl').read_text().splitlines() if l.strip()]

def test_changed_key_is_refused_and_named(tmp_path, hostile):
    out = tmp_path/'r'
    assert _run(out).returncode == 0
    lines = (out/'episodes.jsonl').read_text().splitlines()
    (out/'episodes.jsonl').write_text('\n'.join(lines[:2]) + '\n')   # as if killed at 2 of 4
    r = _run(out, 'math.difficulty=0')
    assert r.returncode == 2 and 'math.difficulty: 1 -> 0' in r.stderr and 'Traceback' not in r.stderr, r.stderr
    assert len(_recs(out)) == 2   # nothing mixed in
    hostile.refused()
    r = _run(out, 'run.threads=1')   # cannot change a result: resumes
    assert r.returncode == 0, r.stderr
    assert [x['episode'] for x in _recs(out)] == [0, 1, 2, 3]

def test_foreign_record_is_refused(tmp_path, hostile):
    out = tmp_path/'r'
    assert _run(out, episodes=2).returncode == 0
    recs = _recs(out)
    _write(out, recs[:1] + [recs[1] | {'family_spec': 'code', 'family': 'code'}])
    r = _run(out, episodes=2)
    assert r.returncode == 2 and "episode 1: family 'code'" in r.stderr, r.stderr
    assert len([l for l in r.stderr.splitlines() if l.strip()]) == 1
    hostile.refused()

def test_config_without_episodes_can_be_respecified(tmp_path):
    out = tmp_path/'r'
    r = _run(out, 'model.name=/nonexistent/typo', method='base')   # fails once the model is looked for
    assert r.returncode == 2 and (out/'config.json').exists() and not (out/'episodes.jsonl').exists(), r.stderr
    r = _run(out)   # the corrected command: the folder holds no episode, so it is re-specified
    assert r.returncode == 0, r.stderr
    assert json.loads((out/'config.json').read_text())['spec']['method'] == 'oracle'

# Issue 42, item 5: a resume continues exactly one run.
def _check(out): return subprocess.run([COVE, 'check', str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)

def _one_line(r, *words):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-1500:])
    assert all(w in lines[0] for w in words), lines[0]

def _write(out, recs): (Path(out)/'episodes.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))

def test_other_seed_records_are_refused(tmp_path, hostile):
    "Another seed's records at the same episode numbers: refused on resume and by `cove check`."
    a, b = tmp_path/'a', tmp_path/'b'
    assert _run(a).returncode == 0 and _run(b, 'run.seed=1').returncode == 0
    _write(a, _recs(b)[:2])   # a killed at 2 of 4, its records swapped for seed 1's
    r = _run(a)
    hostile.mixed(int(r.returncode == 0))
    _one_line(r, 'another run', 'episode 0')
    assert len(_recs(a)) == 2
    c = _check(a)
    assert c.returncode == 1 and any(l.startswith('FAIL') and 'episodes.jsonl: spec' in l and 'another run' in l
                                     for l in c.stdout.splitlines()), c.stdout
    hostile.refused(2)

def test_episode_outside_the_stream_is_refused(tmp_path, hostile):
    "A record numbered past the stream's end is refused, never counted in `metrics.json`."
    out = tmp_path/'r'
    assert _run(out, episodes=2).returncode == 0
    metrics = (out/'metrics.json').read_text()
    recs = _recs(out)
    _write(out, recs + [recs[0] | {'episode': 7}])
    r = _run(out, episodes=2)
    hostile.mixed(int(r.returncode == 0))
    _one_line(r, 'episode 7', 'outside')
    assert (out/'metrics.json').read_text() == metrics
    c = _check(out)
    assert c.returncode == 1 and 'episode 7' in c.stdout and 'outside' in c.stdout, c.stdout
    hostile.refused(2)

def _gsm8k(root:Path, n:int=6) -> Path:
    (root/'gsm8k').mkdir(parents=True)
    rows = [dict(question=f"What is {i} plus {i}?", answer=f"{i} + {i} = {2 * i}\n#### {2 * i}") for i in range(n)]
    (root/'gsm8k'/'train.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    return root

def _run_data(out, data, *extra):
    cmd = [COVE, 'run', '--method', 'oracle', '--tasks', 'math:gsm8k', '--episodes', '3', '--out', str(out), '--quiet',
           '--set', f'data.dir={data}', *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)

def test_killed_split_all_run_resumes(tmp_path):
    "A `--split all` run's records carry their tasks' own splits: a killed one resumes and checks clean."
    data, out = _gsm8k(tmp_path/'data'), tmp_path/'r'
    assert _run_data(out, data, '--split', 'all').returncode == 0
    _write(out, _recs(out)[:1])
    r = _run_data(out, data, '--split', 'all')
    assert r.returncode == 0, r.stderr[-1500:]
    assert [x['episode'] for x in _recs(out)] == [0, 1, 2]
    c = _check(out)
    assert c.returncode == 0, c.stdout

def test_changed_data_is_refused(tmp_path, hostile):
    "The data a run plays is fingerprinted in `config.json`: a resume over changed data is refused, naming it."
    data, out = _gsm8k(tmp_path/'data'), tmp_path/'r'
    assert _run_data(out, data, '--split', 'all').returncode == 0
    assert json.loads((out/'config.json').read_text())['data_sha256']
    _write(out, _recs(out)[:1])
    f = data/'gsm8k'/'train.jsonl'
    f.write_text(f.read_text().replace('plus', 'and'))
    r = _run_data(out, data, '--split', 'all')
    hostile.mixed(int(r.returncode == 0))
    _one_line(r, 'data', 'changed')
    assert len(_recs(out)) == 1
    hostile.refused()
