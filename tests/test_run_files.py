"Issue 24, item 3: run-folder files are opened without following links, regular files only; `cove check` never blocks."
import json, os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')

def _cove(*args, timeout=120):
    return subprocess.run([COVE, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)

def _run(out):
    return _cove('run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--out', str(out), '--quiet')

@pytest.mark.parametrize('name', ['.lock', 'episodes.jsonl', 'metrics.json', 'config.json'])
def test_planted_link_is_not_followed(tmp_path, name, hostile):
    victim, out = tmp_path/'victim', tmp_path/'r'
    victim.write_text('precious\n')
    out.mkdir()
    os.symlink(victim, out/name)
    r = _run(out)
    hostile.outside(int(victim.read_text() != 'precious\n'))
    assert victim.read_text() == 'precious\n'   # neither overwritten, truncated nor appended to
    # refused before anything is written (issue 42: one rule for every file, metrics.json too)
    assert r.returncode == 2 and 'symbolic link' in r.stderr and 'Traceback' not in r.stderr, r.stderr
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
    assert ('episodes.jsonl' in r.stdout and 'FIFO' in r.stdout and 'metrics.json' in r.stdout
            and 'symbolic link' in r.stdout)
    hostile.refused(2)

# Issue 42, item 4: one rule for every file of a run folder (stores, adapters, records, config), and `cove check`
# names links, hard links and special files anywhere in it.
TINY = ['run', '--method', 'harness_only', '--tasks', 'math', '--episodes', '1', '--model', 'tiny', '--quiet',
        '--set', 'model.max_new_tokens=4']

def _refused(r, *words):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-1500:])
    assert all(w in lines[0] for w in words), lines[0]

@pytest.mark.parametrize('target', ['existing', 'dangling'])
def test_store_link_is_not_followed(tmp_path, target, hostile):
    "A `kb.sqlite` planted as a link (to a file, or dangling): refused before SQLite opens it; the target untouched."
    victim, out = tmp_path/'victim.sqlite', tmp_path/'r'
    if target == 'existing': victim.write_bytes(b'')   # an empty file: SQLite would make it cove's store
    before = victim.read_bytes() if victim.exists() else None
    out.mkdir()
    os.symlink(victim, out/'kb.sqlite')
    r = _cove(*TINY, '--out', str(out))
    touched = (victim.read_bytes() if victim.exists() else None) != before
    hostile.outside(int(touched))
    assert not touched
    _refused(r, 'kb.sqlite', 'link')
    hostile.refused()

def test_adapters_link_is_not_followed(tmp_path, hostile):
    "`adapters/` planted as a link to a folder elsewhere: the run is refused before it writes anything there."
    victim, out = tmp_path/'victim', tmp_path/'r'
    victim.mkdir()
    out.mkdir()
    os.symlink(victim, out/'adapters', target_is_directory=True)
    r = _run(out)
    hostile.outside(len(list(victim.iterdir())))
    assert list(victim.iterdir()) == []
    _refused(r, 'adapters', 'link')
    assert not (out/'config.json').exists()
    hostile.refused()

def test_hard_linked_records_are_refused_and_checked(tmp_path, hostile):
    "`episodes.jsonl` as a hard link to a file elsewhere: never appended to, and `cove check` names it."
    out = tmp_path/'r'
    assert _run(out).returncode == 0
    victim = tmp_path/'victim.jsonl'
    os.link(out/'episodes.jsonl', victim)
    before = victim.read_bytes()
    lines = before.splitlines(keepends=True)
    (out/'episodes.jsonl').write_bytes(b''.join(lines[:1]))   # as if killed after the first episode (same inode)
    before = victim.read_bytes()
    r = _run(out)
    hostile.outside(int(victim.read_bytes() != before))
    assert victim.read_bytes() == before
    _refused(r, 'episodes.jsonl', 'hard link')
    c = _cove('check', str(out), timeout=60)
    assert c.returncode == 1 and 'episodes.jsonl' in c.stdout and 'hard link' in c.stdout, c.stdout
    hostile.refused(2)

def test_unrelated_config_json_is_refused(tmp_path, hostile):
    "An --out folder holding someone's own `config.json` (not a cove run's): refused, the file left as it was."
    out = tmp_path/'r'
    out.mkdir()
    (out/'config.json').write_text('{"theme": "dark"}\n')
    r = _run(out)
    hostile.outside(int((out/'config.json').read_text() != '{"theme": "dark"}\n'))
    assert (out/'config.json').read_text() == '{"theme": "dark"}\n'
    _refused(r, 'config.json', 'not a cove run')
    hostile.refused()

def test_a_run_folder_of_another_format_is_refused(tmp_path, hostile):
    """A run whose `config.json` records another run format (none: written before formats) is not resumed, in one
    line, its records left as they were; `cove check` fails its `config.json` saying why."""
    out = tmp_path/'r'
    assert _run(out).returncode == 0
    conf = json.loads((out/'config.json').read_text())
    assert conf['format'] == 1
    (out/'config.json').write_text(json.dumps({k: v for k, v in conf.items() if k != 'format'}))
    before = (out/'episodes.jsonl').read_bytes()
    r = _run(out)
    hostile.outside(int((out/'episodes.jsonl').read_bytes() != before))
    _refused(r, 'run format 0', 'a new --out')
    c = _cove('check', str(out), timeout=60)
    assert c.returncode == 1 and 'run format 0' in c.stdout, c.stdout
    hostile.refused()

def test_check_names_odd_files_anywhere(tmp_path, hostile):
    "A hard link, a FIFO and a link in a subfolder of a finished run are each named by `cove check`."
    out = tmp_path/'r'
    assert _run(out).returncode == 0
    (out/'sub').mkdir()
    os.link(out/'metrics.json', tmp_path/'elsewhere.json')
    os.mkfifo(out/'sub'/'pipe')
    os.symlink('/etc/passwd', out/'sub'/'link')
    c = _cove('check', str(out), timeout=30)
    assert c.returncode == 1, c.stdout
    for name, kind in [('metrics.json', 'hard link'), ('sub/pipe', 'FIFO'), ('sub/link', 'symbolic link')]:
        assert any(name in l and kind in l and l.startswith('FAIL') for l in c.stdout.splitlines()), (name, c.stdout)
    hostile.refused(3)
