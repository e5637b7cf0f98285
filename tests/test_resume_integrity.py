"Issue 24, item 4: a resume compares the whole effective config, refuses foreign records, and lets an empty folder be re-specified."
import json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _run(out, *sets, method='oracle', episodes=4):
    cmd = [COVE, 'run', '--method', method, '--tasks', 'math', '--episodes', str(episodes), '--out', str(out), '--quiet']
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
    rec = _recs(out)[0] | {'episode': 2, 'family_spec': 'code', 'family': 'code'}
    with open(out/'episodes.jsonl', 'a') as f: f.write(json.dumps(rec) + '\n')
    r = _run(out, episodes=2)
    assert r.returncode == 2 and "family 'code'" in r.stderr, r.stderr
    assert len([l for l in r.stderr.splitlines() if l.strip()]) == 1
    hostile.refused()

def test_config_without_episodes_can_be_respecified(tmp_path):
    out = tmp_path/'r'
    r = _run(out, 'model.name=/nonexistent/typo', method='base')   # fails once the model is looked for
    assert r.returncode == 2 and (out/'config.json').exists() and not (out/'episodes.jsonl').exists(), r.stderr
    r = _run(out)   # the corrected command: the folder holds no episode, so it is re-specified
    assert r.returncode == 0, r.stderr
    assert json.loads((out/'config.json').read_text())['spec']['method'] == 'oracle'
