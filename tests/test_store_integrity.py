"Issue 24, item 4: a store the records need is refused when missing or not cove's, like a missing adapter."
import json, os, sqlite3, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _run(out, *extra):
    cmd = [COVE, 'run', '--method', 'harness_only', '--tasks', 'math', '--episodes', '2', '--model', 'tiny', '--quiet',
           '--set', 'model.batch_size=2', '--set', 'model.max_new_tokens=8', '--out', str(out), *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, 'OMP_NUM_THREADS': '1'})

def test_missing_and_foreign_store(tmp_path, hostile):
    out = tmp_path/'r'
    assert _run(out).returncode == 0
    kb = out/'kb.sqlite'
    assert kb.exists()
    kb.unlink()
    for side in ('-wal', '-shm'): Path(f"{kb}{side}").unlink(missing_ok=True)
    r = _run(out)
    assert r.returncode == 2 and 'kb.sqlite is missing' in r.stderr and 'Traceback' not in r.stderr, r.stderr[-1500:]
    assert not kb.exists()   # refused, not started fresh
    r = _run(out, '--set-aside-corrupt')
    assert r.returncode == 0, r.stderr[-1500:]
    notes = [json.loads(l) for l in (out/'set_aside.jsonl').read_text().splitlines()]
    assert notes[-1]['path'] == 'kb.sqlite' and notes[-1]['to'] is None
    kb.unlink()
    for side in ('-wal', '-shm'): Path(f"{kb}{side}").unlink(missing_ok=True)
    with sqlite3.connect(kb) as c: c.execute('CREATE TABLE notes (x)')   # a valid SQLite file cove did not write
    r = _run(out)
    assert r.returncode == 2 and 'cove did not write' in r.stderr, r.stderr[-1500:]
    with sqlite3.connect(kb) as c: assert [r[0] for r in c.execute("SELECT name FROM sqlite_master")] == ['notes']
    hostile.refused(2)

def _check(out): return subprocess.run([COVE, 'check', str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)

def test_another_runs_store_is_refused(tmp_path, hostile):
    """Issue 42, item 5: a store is bound to its run; another run's `kb.sqlite` swapped in after a kill is refused on
    resume and named by `cove check`."""
    a, b = tmp_path/'a', tmp_path/'b'
    assert _run(a).returncode == 0 and _run(b, '--seed', '1').returncode == 0
    lines = (a/'episodes.jsonl').read_text().splitlines(keepends=True)
    (a/'episodes.jsonl').write_text(lines[0])   # killed after the first episode
    for side in ('', '-wal', '-shm'): Path(f"{a/'kb.sqlite'}{side}").unlink(missing_ok=True)
    (a/'kb.sqlite').write_bytes((b/'kb.sqlite').read_bytes())
    c = _check(a)
    assert c.returncode == 1 and any(l.startswith('FAIL') and 'kb.sqlite' in l and 'another run' in l
                                     for l in c.stdout.splitlines()), c.stdout
    r = _run(a)
    hostile.mixed(int(r.returncode == 0))
    assert r.returncode == 2 and 'kb.sqlite' in r.stderr and 'another run' in r.stderr, r.stderr[-1500:]
    assert 'Traceback' not in r.stderr and len((a/'episodes.jsonl').read_text().splitlines()) == 1
    hostile.refused(2)
