"Issue 24, item 5: a failure that is not the task's stops the run (exit 3) and is never recorded as the task's failure."
import json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _cove(*args): return subprocess.run([COVE, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
def _recs(p): return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def test_unreachable_backend_stops_with_exit_3(tmp_path, hostile):
    out = tmp_path/'r'
    r = _cove('run', '--method', 'base', '--tasks', 'math', '--episodes', '2', '--out', str(out), '--quiet',
              '--set', 'model.backend=openai', '--set', 'model.base_url=http://127.0.0.1:9/v1', '--set', 'model.name=x')
    assert r.returncode == 3, r.stderr[-2000:]
    assert 'generation failed' in r.stderr and 'Traceback' not in r.stderr
    assert _recs(out/'episodes.jsonl') == []   # no episode scored as the task's failure
    hostile.refused()

def test_recorded_infra_errors_are_replayed(tmp_path):
    out = tmp_path/'r'
    assert _cove('run', '--method', 'oracle', '--tasks', 'math', '--episodes', '3', '--out', str(out), '--quiet').returncode == 0
    recs = _recs(out/'episodes.jsonl')
    for r in recs[1:]: r.update(status='error', success=False, message='policy error: ConnectError: refused')
    (out/'episodes.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))   # as an older cove recorded them
    r = _cove('run', '--method', 'oracle', '--tasks', 'math', '--episodes', '3', '--out', str(out), '--quiet')
    assert r.returncode == 0, r.stderr
    again = _recs(out/'episodes.jsonl')
    assert [x['episode'] for x in again] == [0, 1, 2] and not any('policy error' in x['message'] for x in again)
    assert len(_recs(out/'episodes.jsonl.infra')) == 2
