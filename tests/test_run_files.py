"Issue 24, item 3: run-folder files are opened without following links, regular files only; `cove check` never blocks."
import os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _cove(*args, timeout=120):
    return subprocess.run([COVE, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)

def _run(out): return _cove('run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--out', str(out), '--quiet')

@pytest.mark.parametrize('name', ['.lock', 'episodes.jsonl', 'metrics.json', 'config.json'])
def test_planted_link_is_not_followed(tmp_path, name, hostile):
    victim, out = tmp_path/'victim', tmp_path/'r'
    victim.write_text('precious\n')
    out.mkdir()
    os.symlink(victim, out/name)
    r = _run(out)
    hostile.outside(int(victim.read_text() != 'precious\n'))
    assert victim.read_text() == 'precious\n'   # neither overwritten, truncated nor appended to
    if name == 'metrics.json':   # written atomically: the rename replaces the link itself, never its target
        assert r.returncode == 0 and not (out/name).is_symlink(), r.stderr
    else:
        assert r.returncode == 2 and 'not a regular file' in r.stderr and 'Traceback' not in r.stderr, r.stderr
    hostile.refused()

def test_check_names_fifo_and_self_link_without_blocking(tmp_path, hostile):
    out = tmp_path/'r'
    assert _run(out).returncode == 0
    (out/'episodes.jsonl').unlink()
    os.mkfifo(out/'episodes.jsonl')
    (out/'metrics.json').unlink()
    os.symlink('metrics.json', out/'metrics.json')   # a link to itself
    r = _cove('check', str(out), timeout=30)   # a blocked open would time out here
    assert r.returncode != 0, r.stdout
    assert 'episodes.jsonl' in r.stdout and 'FIFO' in r.stdout and 'metrics.json' in r.stdout and 'symbolic link' in r.stdout
    hostile.refused(2)
