"Issue 14: one run per folder, arguments checked before anything is written, corrupt state files named, `cove check` (tiny model; cheap)."
import json, os, shutil, subprocess, sys, time
from pathlib import Path
import pytest
from cove.cli import main

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')
ENV = {**os.environ, 'OMP_NUM_THREADS': '1'}

def _run_args(out, method='base', episodes=2):
    return ['run', '--method', method, '--tasks', 'tableqa,math', '--episodes', str(episodes), '--model', 'tiny', '--seed', '3',
            '--set', 'model.max_new_tokens=4', '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def _main(argv, capsys):
    "`cove ARGV` in this process: (exit status, stdout, stderr)."
    capsys.readouterr()
    rc = main([str(a) for a in argv]); o = capsys.readouterr()
    return rc, o.out, o.err

def test_two_concurrent_launches(tmp_path, capsys):
    "While one `cove run` plays, a second launch on its folder exits 2 naming the first's pid; the first finishes; the folder checks clean."
    import cove.run; cove.run._import_methods()   # warm this process, so that its launch below reaches the folder at once
    out, args = tmp_path/'R', _run_args(tmp_path/'R', episodes=1)
    a = subprocess.Popen([COVE, *args], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120   # launch the second once the first is in the folder (it holds the lock before it writes anything)
    while a.poll() is None and time.time() < deadline and not ((out/'.lock').exists() or (out/'config.json').exists()): time.sleep(0.02)
    rc, _, err = _main(args, capsys)   # the second launch: `cove run`'s entry point, in this process
    ea = a.communicate(timeout=300)[1]
    assert a.returncode == 0, ea[-2000:]
    assert rc == 2 and f"is in use by another run (pid {a.pid})" in err and err.count('\n') == 1, err
    assert sorted(e['episode'] for e in _episodes(out)) == list(range(2))   # before: each episode twice
    rc, o, e = _main(['check', out], capsys)
    assert rc == 0 and o.rstrip().endswith('no problem in 5 items'), o + e

@pytest.mark.parametrize('argv, why', [
    (['run', '--method', 'nosuch', '--tasks', 'math', '--episodes', '2'], "unknown method 'nosuch'"),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '-3'], 'episodes per family must be a whole number >= 1, not -3'),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '0'], '>= 1, not 0'),
    (['run', '--method', 'oracle', '--tasks', 'chess', '--episodes', '2'], "unknown task family 'chess'"),
    (['run', '--method', 'oracle', '--tasks', 'math:nosuch', '--episodes', '2'], "unknown source 'nosuch' for math"),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--split', 'nosuch'], "no split 'nosuch'"),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--set', 'run.epochs=0'], 'run.epochs must be >= 1'),
    (['demo', '--methods', 'nosuch', '--model', 'tiny'], "unknown method 'nosuch'"),
    (['demo', '--methods', 'oracle', '--episodes', '-1', '--model', 'tiny'], 'not -1'),
])
def test_bad_arguments_leave_no_folder(tmp_path, capsys, argv, why):
    out = tmp_path/'R'
    rc, _, err = _main([*argv, '--out', out], capsys)
    assert rc == 2 and why in err and err.count('\n') == 1, err
    assert not out.exists()   # before: `--method nosuch` left a config.json that refused every later run there

def test_corrupt_state_file_is_named_not_started_fresh(tmp_path, capsys):
    out = tmp_path/'R'; out.mkdir()
    bad = b'{"method": "cove", "applied": {"math|test|m#0": {"chan'   # a copy cut short
    (out/'workflow_state.json').write_bytes(bad)
    rc, _, err = _main(['run', '--method', 'cove', '--tasks', 'math', '--episodes', '1', '--model', 'tiny', '--out', out, '--quiet'], capsys)
    assert rc == 2 and err.count('\n') == 1, err
    assert f"{out/'workflow_state.json'} is corrupt" in err and 'move it aside and rerun' in err, err
    assert (out/'workflow_state.json').read_bytes() == bad and not (out/'episodes.jsonl').exists()   # nothing started over it
    (out/'config.json').write_text('{"spec": {"meth')
    rc, _, err = _main(['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '1', '--out', out, '--quiet'], capsys)
    assert rc == 2 and f"{out/'config.json'} is corrupt" in err, err

@pytest.fixture(scope='module')
def good_run(tmp_path_factory):
    "A finished run folder (the oracle: no model to load)."
    out = tmp_path_factory.mktemp('good')/'R'
    assert main(['run', '--method', 'oracle', '--tasks', 'tableqa,math', '--episodes', '2', '--seed', '3', '--out', str(out), '--quiet']) == 0
    return out

def _copy(good, tmp_path):
    d = tmp_path/'R'; shutil.copytree(good, d); return d

def _failed(out):
    "Items `cove check` marks FAIL."
    return [l.split()[1] + (' ' + l.split()[2] if l.split()[1].endswith(':') else '') for l in out.splitlines() if l.startswith('FAIL')]

def test_check_passes_on_a_good_folder(good_run, tmp_path, capsys):
    rc, out, _ = _main(['check', good_run], capsys)
    assert rc == 0 and out.rstrip().endswith('no problem in 5 items') and not _failed(out), out
    exp = tmp_path/'exp'; shutil.copytree(good_run, exp/'oracle'); shutil.copytree(good_run, exp/'base')   # an experiment folder
    rc, out, _ = _main(['check', exp], capsys)
    assert rc == 0 and out.rstrip().endswith('no problem in 10 items') and 'base/episodes.jsonl: unique' in out, out

def test_check_fails_on_a_duplicated_line(good_run, tmp_path, capsys):
    d = _copy(good_run, tmp_path); p = d/'episodes.jsonl'
    p.write_text(p.read_text() + p.read_text().splitlines(keepends=True)[1])
    rc, out, _ = _main(['check', d], capsys)
    assert rc == 1 and 'episodes.jsonl: unique' in _failed(out) and 'episodes recorded more than once: [1]' in out, out

def test_check_fails_on_a_missing_episode(good_run, tmp_path, capsys):
    d = _copy(good_run, tmp_path); p = d/'episodes.jsonl'; ls = p.read_text().splitlines(keepends=True)
    p.write_text(''.join(ls[:1] + ls[2:]))
    rc, out, _ = _main(['check', d], capsys)
    assert rc == 1 and 'episodes.jsonl: contiguous' in _failed(out) and 'missing episodes: [1]' in out, out
    p.write_text(''.join(ls[:-1]))   # the last one gone: metrics.json says 4
    rc, out, _ = _main(['check', d], capsys)
    assert rc == 1 and _failed(out) == ['metrics.json'], out

def test_check_fails_on_a_garbage_sqlite(good_run, tmp_path, capsys):
    d = _copy(good_run, tmp_path); (d/'checkpoints').mkdir()
    (d/'checkpoints'/'kb.sqlite').write_bytes(b'garbage, not a database ' * 64)
    rc, out, _ = _main(['check', d], capsys)
    assert rc == 1 and _failed(out) == ['checkpoints/kb.sqlite'] and 'file is not a database' in out, out
