"""Issue 14: one run per folder, arguments checked before anything is written, corrupt state files named, `cove check`
(tiny model; cheap)."""
import json, os, shutil, subprocess, sys, time
from pathlib import Path
import pytest
from cove.cli import main

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')
ENV = {**os.environ, 'OMP_NUM_THREADS': '1'}

def _run_args(out, method='base', episodes=2):
    return ['run', '--method', method, '--tasks', 'tableqa,math', '--episodes', str(episodes), '--model', 'tiny',
            '--seed', '3', '--set', 'model.max_new_tokens=4', '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def _main(argv, capsys):
    "`cove ARGV` in this process: (exit status, stdout, stderr)."
    capsys.readouterr()
    rc = main([str(a) for a in argv]); o = capsys.readouterr()
    return rc, o.out, o.err

def test_two_concurrent_launches(tmp_path, capsys):
    """While one `cove run` plays, a second launch on its folder exits 2 naming the first's pid; the first finishes; the
    folder checks clean."""
    import cove.method
    cove.method.import_methods()   # warm this process, so that its launch below reaches the folder at once
    out, args = tmp_path/'R', _run_args(tmp_path/'R', episodes=1)
    a = subprocess.Popen([COVE, *args], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # launch the second once the first is in the folder (it holds the lock before it writes anything)
    deadline = time.time() + 120
    while a.poll() is None and time.time() < deadline and not ((out/'.lock').exists() or (out/'config.json').exists()):
        time.sleep(0.02)
    rc, _, err = _main(args, capsys)   # the second launch: `cove run`'s entry point, in this process
    ea = a.communicate(timeout=300)[1]
    assert a.returncode == 0, ea[-2000:]
    assert rc == 2 and f"is in use by another run (pid {a.pid})" in err and err.count('\n') == 1, err
    assert sorted(e['episode'] for e in _episodes(out)) == list(range(2))   # before: each episode twice
    rc, o, e = _main(['check', out], capsys)
    assert rc == 0 and o.rstrip().endswith('no problem in 5 items'), o + e

@pytest.mark.parametrize('argv, why', [
    (['run', '--method', 'nosuch', '--tasks', 'math', '--episodes', '2'], "unknown method 'nosuch'"),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '-3'],
     'episodes per family must be a whole number >= 1, not -3'),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '0'], '>= 1, not 0'),
    (['run', '--method', 'oracle', '--tasks', 'chess', '--episodes', '2'], "unknown task family 'chess'"),
    (['run', '--method', 'oracle', '--tasks', 'math:nosuch', '--episodes', '2'], "unknown source 'nosuch' for math"),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--split', 'nosuch'], "no split 'nosuch'"),
    (['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--set', 'run.epochs=0'],
     'run.epochs=0: must be >= 1'),
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
    rc, _, err = _main(['run', '--method', 'cove', '--tasks', 'math', '--episodes', '1', '--model', 'tiny', '--out',
                        out, '--quiet'], capsys)
    assert rc == 2 and err.count('\n') == 1, err
    assert f"{out/'workflow_state.json'} is corrupt" in err and 'move it aside and rerun' in err, err
    # nothing started over it
    assert (out/'workflow_state.json').read_bytes() == bad and not (out/'episodes.jsonl').exists()
    (out/'config.json').write_text('{"spec": {"meth')
    rc, _, err = _main(['run', '--method', 'oracle', '--tasks', 'math', '--episodes', '1', '--out', out, '--quiet'],
                       capsys)
    assert rc == 2 and f"{out/'config.json'} is corrupt" in err, err

@pytest.fixture(scope='module')
def good_run(tmp_path_factory):
    "A finished run folder (the oracle: no model to load)."
    out = tmp_path_factory.mktemp('good')/'R'
    assert main(['run', '--method', 'oracle', '--tasks', 'tableqa,math', '--episodes', '2', '--seed', '3', '--out',
                 str(out), '--quiet']) == 0
    return out

def _copy(good, tmp_path):
    d = tmp_path/'R'; shutil.copytree(good, d); return d

def _failed(out):
    "Items `cove check` marks FAIL."
    return [l.split()[1] + (' ' + l.split()[2] if l.split()[1].endswith(':') else '') for l in out.splitlines()
            if l.startswith('FAIL')]

def test_check_passes_on_a_good_folder(good_run, tmp_path, capsys):
    rc, out, _ = _main(['check', good_run], capsys)
    assert rc == 0 and out.rstrip().endswith('no problem in 5 items') and not _failed(out), out
    # an experiment folder
    exp = tmp_path/'exp'; shutil.copytree(good_run, exp/'oracle'); shutil.copytree(good_run, exp/'base')
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

# ---------------------------------------------------------------------------------------------------------------------
# The fault-injection suite: kills, torn writes, a full disk, corrupt stores. A small sample by default;
# `COVE_FAULTS=full` (`make faults`) runs the heavy part: >= 10 kills per method, >= 50 faults in all.
import errno, multiprocessing, multiprocessing.forkserver, random, resource, signal, zlib
from collections import Counter
from cove.check import check_run

FULL = os.environ.get('COVE_FAULTS') == 'full'
TALLY = Counter()   # kills survived, faults injected, episodes lost: the summary line
TINY = ['--set', 'model.max_new_tokens=4', '--set', 'agent.shots=0', '--set', 'model.batch_size=1', '--set',
        'trigger.k=100', '--set', 'evolver.train_every=0', '--set', 'evolver.cold_start=false', '--set',
        'evolver.max_turns=1', '--set', 'memrl.summary_tokens=8', '--set', 'evo_memory.summary_tokens=8']
STORES = {'harness_only': 'kb.sqlite', 'memrl': 'memrl.sqlite', 'evolver': 'evolver.sqlite',
          'evo_memory': 'memory.sqlite', 'coevo': 'coevo.sqlite'}

def _argv(out, method, episodes, tasks='tableqa,math'):
    return ['run', '--method', method, '--tasks', tasks, '--episodes', str(episodes), '--model', 'tiny', '--seed', '3',
            *TINY, '--out', str(out), '--quiet']

@pytest.fixture(scope='module', autouse=True)
def fault_summary(request):
    "After this module: its counts for the summary line (`tests/conftest.py` prints it), and no episode lost."
    yield
    # the forks' parent process, so that none outlives the tests
    if _FORK is not None: multiprocessing.forkserver._forkserver._stop()
    counts = {k: TALLY[k] for k in ('kills', 'faults', 'lost')}
    request.config._cove_faults = counts   # printed at the end by `tests/conftest.py`
    # an xdist worker: to the controller
    if hasattr(request.config, 'workeroutput'): request.config.workeroutput['cove_faults'] = counts
    assert TALLY['lost'] == 0, f"{TALLY['lost']} episodes lost"

def _child(argv, err, limit=None):
    """A forked `cove run`: `cove.cli.main(argv)`, stderr to the file `err`, under a file-size limit of `limit` bytes if
    given."""
    fd = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644); os.dup2(fd, 2); os.dup2(fd, 1)
    if limit: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    import threading
    from tqdm.std import tqdm
    tqdm.set_lock(threading.RLock())   # not a multiprocessing lock: a killed child would leave its semaphore behind
    from cove.cli import main as cove_main
    sys.exit(cove_main(argv))

PRELOAD = ['cove.cli', 'cove.run', 'cove.llm', 'cove.train', 'cove.workflow', 'cove.memrl', 'cove.evolver',
           'cove.evo_memory', 'cove.self_challenging', 'cove.coevo', 'cove.sandbox', 'cove.tasks.code', 'cove.tasks.code_levels',
           'cove.tasks.code_benchmarks', 'cove.tasks.math', 'cove.tasks.tableqa', 'cove.tasks.multihop',
           'cove.tasks.formal', 'transformers.models.auto.modeling_auto', 'transformers.models.auto.tokenization_auto',
           'transformers.models.llama.modeling_llama', 'transformers.models.llama.configuration_llama',
           'transformers.generation.utils', 'transformers.tokenization_utils_fast', 'peft', 'accelerate',
           # what a run imports lazily
           'sentence_transformers', 'datasets', 'pandas', 'scipy.stats', 'sympy', 'sklearn', 'bm25s']
_FORK = None
def _fork():
    """Forks of one process that imported cove and every method once: a `cove run` starts in a fraction of a second, not
    3-5 s of imports."""
    global _FORK
    if _FORK is None:
        _FORK = multiprocessing.get_context('forkserver')
        _FORK.set_forkserver_preload(PRELOAD)
    return _FORK

def _start(argv, err, limit=None):
    p = _fork().Process(target=_child, args=([str(a) for a in argv], str(err), limit)); p.start(); return p

def _nlines(p:Path) -> int:
    try: return p.read_bytes().count(b'\n')
    except FileNotFoundError: return 0

def _tear(p:Path, rng) -> int:
    """Cut a random number of bytes (1 .. the whole last line) off the end of `p`, as a kill mid-write leaves it;
    returns how many."""
    data = p.read_bytes(); last = len(data) - (data.rstrip(b'\n').rfind(b'\n') + 1)
    k = rng.randint(1, last); p.write_bytes(data[:-k]); return k

def _finish(out, argv, err, n):
    "Run `argv` to the end; then `cove check` passes with exactly `n` unique episodes (the lost ones counted)."
    p = _start(argv, err); p.join(600)
    assert p.exitcode == 0, Path(err).read_text()[-3000:]
    eps = [json.loads(l)['episode'] for l in (Path(out)/'episodes.jsonl').read_text().splitlines()]
    TALLY['lost'] += n - len(set(eps) & set(range(n)))
    assert sorted(eps) == list(range(n)), f"episodes {sorted(eps)}"
    bad = [i for i in check_run(out) if not i[1]]
    assert not bad, bad
    _store_agrees(out)

# the stores' own tables of applied episodes (`cove check` compares the JSON states)
APPLIED = {'memrl.sqlite': 'applied', 'evolver.sqlite': 'episodes'}

def _store_agrees(out):
    """Every recorded episode is applied once in the method's store, and nothing else is: its state agrees with the
    records."""
    import sqlite3
    from cove.check import record_keys
    want = sorted(k for k, _ in record_keys(_episodes(out)))
    for name, table in APPLIED.items():
        if not (Path(out)/name).exists(): continue
        con = sqlite3.connect(Path(out)/name)
        try: have = sorted(r[0] for r in con.execute(f'SELECT key FROM {table}'))
        finally: con.close()
        assert have == want, (name, sorted(set(have) ^ set(want))[:5], len(have), len(want))

def _kill_and_resume(tmp_path, method, kills, tear_p=0.0, logs=()):
    """`kills` times: start the run, wait for a new episode, kill -9 it a seeded random moment later (up to a quarter of
    the time it took to get there), maybe tear a log's tail; then finish and check."""
    rng = random.Random(zlib.crc32(method.encode()))
    per = 16 if FULL else 6; n = 2 * per
    out, err = tmp_path/'R', tmp_path/'stderr.txt'; argv = _argv(out, method, per)
    done = 0
    for _ in range(kills):
        before = _nlines(out/'episodes.jsonl'); t0 = time.time(); p = _start(argv, err)
        while p.is_alive() and _nlines(out/'episodes.jsonl') <= before and time.time() < t0 + 300: time.sleep(0.01)
        # a random moment soon after it (on an idle machine a tiny run ends within a second)
        time.sleep(rng.uniform(0, 0.25) * min(time.time() - t0, 0.2))
        if not p.is_alive():
            assert p.exitcode == 0, Path(err).read_text()[-3000:]
            break   # it finished first
        p.kill(); p.join(); done += 1; TALLY['kills'] += 1; TALLY['faults'] += 1
        if rng.random() < tear_p:
            for log in [out/'episodes.jsonl', *(out/l for l in logs)]:
                if log.exists() and log.stat().st_size: _tear(log, rng); TALLY['faults'] += 1
    _finish(out, argv, err, n)
    return done

KILLED = ['base', 'harness_only', 'memrl', 'evo_memory', 'evolver'] if FULL else ['base', 'harness_only']

@pytest.mark.parametrize('method', KILLED)
def test_kills_then_resume(tmp_path, method):
    """kill -9 at seeded random moments, each followed by a resume (and, now and then, a torn tail); then `cove check`
    passes with every episode once."""
    k = 10 if FULL else 2
    done = _kill_and_resume(tmp_path, method, k, tear_p=0.3 if FULL else 0.0)
    assert done == k, f"only {done} of {k} kills landed before the run ended"

def test_torn_tail_then_resume(tmp_path):
    """A kill, then a random number of bytes (short of the whole line) cut off the tail of episodes.jsonl and of the
    method's own logs: the resume moves the torn bytes to `.torn` and loses nothing."""
    method, logs = ('coevo', ('coevo_llm.jsonl', 'coevo_judge.jsonl')) if FULL else ('harness_only', ())
    rng = random.Random(zlib.crc32(b'torn' + method.encode()))
    out, err = tmp_path/'R', tmp_path/'stderr.txt'; argv = _argv(out, method, 3)
    p = _start(argv, err)
    while p.is_alive() and _nlines(out/'episodes.jsonl') < 2: time.sleep(0.01)
    assert p.is_alive(), Path(err).read_text()[-3000:]
    p.kill(); p.join(); TALLY['kills'] += 1; TALLY['faults'] += 1
    torn = [q for q in [out/'episodes.jsonl', *(out/l for l in logs)] if q.exists() and q.stat().st_size > 2]
    for q in torn:
        data = q.read_bytes(); last = len(data) - (data.rstrip(b'\n').rfind(b'\n') + 1)
        # part of the last line stays: a torn record
        q.write_bytes(data[:-rng.randint(1, last - 1)]); TALLY['faults'] += 1
    _finish(out, argv, err, 6)
    assert (out/'episodes.jsonl.torn').exists()   # the torn bytes were kept, not appended to
    # the method's own logs: every line but a torn last one parses
    for q in torn[1:]: [json.loads(l) for l in q.read_text().splitlines()[:-1]]

def _cove(argv, limit=None):
    "A real `cove` subprocess, under a file-size limit (`RLIMIT_FSIZE`) when `limit` is given."
    pre = (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))) if limit else None
    return subprocess.run([COVE, *map(str, argv)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600,
                          preexec_fn=pre)

def _stopped_cleanly(r, out, why, named=None):
    """The run stopped with exit 3 and one line naming the file in `named` (default `out`) it could not write, why (one
    of `why`, split at `|`), and what to do; nothing written in `out` is damaged."""
    assert r.returncode == 3 and 'Traceback' not in r.stderr, r.stderr[-3000:]
    last = r.stderr.strip().splitlines()[-1]
    assert (last.startswith(f"cove run: error: could not write {named or out}/")
            and any(f"({w})" in last for w in why.split('|')) and 'free some disk space' in last
            and 'rerun the same command to resume' in last), last
    data = (Path(out)/'episodes.jsonl').read_bytes() if (Path(out)/'episodes.jsonl').exists() else b''
    assert not data or data.endswith(b'\n'), data[-200:]   # no torn record left behind
    # metrics.json may be a batch behind: the rerun rewrites it
    bad = [i for i in check_run(out) if not i[1] and i[0] != 'metrics.json']
    assert not bad, bad
    TALLY['faults'] += 1

DISKED = ['base', 'harness_only', 'memrl', 'evo_memory', 'evolver'] if FULL else ['base']

@pytest.mark.parametrize('method', DISKED)
def test_file_size_limit_then_resume(tmp_path, method):
    """Under a file-size limit (a full disk, as far as a write can tell) the run stops with one line naming the file;
    rerun with room, it resumes to the end."""
    rng = random.Random(zlib.crc32(b'disk' + method.encode()))
    out, err = tmp_path/'R', tmp_path/'stderr.txt'; argv = _argv(out, method, 4)
    # 12000 bytes: config.json (about 9.7 kB) fits with its run id, data fingerprint and plugins, not all the records do
    for lim in ([12000] + [rng.randint(12000, 60000)] * FULL):
        if method == 'base': r = _cove(argv, limit=lim)   # the console script itself
        else:
            p = _start(argv, err, limit=lim); p.join(600)
            r = subprocess.CompletedProcess(argv, p.exitcode, '', err.read_text())
        if r.returncode == 0 and lim != 12000: break   # room enough for the rest
        _stopped_cleanly(r, out, 'File too large' if method == 'base'
                         else 'File too large|disk I/O error|database or disk is full')   # SQLite names its own error
    _finish(out, argv, err, 8)

def _can_unshare() -> bool:
    try: return subprocess.run(['unshare', '-m', 'true'], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError): return False

@pytest.mark.skipif(not _can_unshare(), reason='needs `unshare -m` (root) for a small tmpfs')
def test_full_disk_then_resume(tmp_path):
    """On a full disk (a 24 KiB tmpfs in a private mount namespace) the run stops with one line, ENOSPC; its folder,
    copied out, resumes to the end."""
    mnt, out = tmp_path/'mnt', tmp_path/'R'; mnt.mkdir()
    script = f'mount -t tmpfs -o size=24k tmpfs {mnt} || exit 99; "$@"; rc=$?; cp -a {mnt}/R {out}; exit $rc'
    r = subprocess.run(['unshare', '-m', 'sh', '-c', script, 'sh', COVE, *_argv(mnt/'R', 'base', 4)], cwd=ROOT, env=ENV,
                       capture_output=True, text=True, timeout=600)
    _stopped_cleanly(r, out, 'No space left on device', named=mnt/'R')   # the folder as copied out of the tmpfs
    _finish(out, _argv(out, 'base', 4), tmp_path/'stderr.txt', 8)

CORRUPTED = list(STORES) if FULL else ['memrl']

@pytest.mark.parametrize('method', CORRUPTED)
def test_corrupt_store_named_then_set_aside(tmp_path, capsys, method):
    """Garbage over a method's store: one line naming it, the file untouched; with --set-aside-corrupt it is moved aside
    and the run goes on with a fresh store."""
    store, out = STORES[method], tmp_path/'R'; argv = _argv(out, method, 1)
    # in another process: a connection left open here would write the old store back over the garbage
    p = _start(argv, tmp_path/'stderr.txt'); p.join(600)
    assert p.exitcode == 0, (tmp_path/'stderr.txt').read_text()[-3000:]
    # one episode left to play
    p = out/'episodes.jsonl'; p.write_text(''.join(p.read_text().splitlines(keepends=True)[:-1]))
    garbage = b'garbage, not a database ' * 64
    for side in ('-wal', '-shm'): Path(f"{out/store}{side}").unlink(missing_ok=True)
    (out/store).write_bytes(garbage); TALLY['faults'] += 1
    rc, _, err = _main(argv, capsys)
    assert (rc == 2 and err.count('\n') == 1 and f"{out/store} is not a sound SQLite database" in err
            and '--set-aside-corrupt' in err), err
    assert (out/store).read_bytes() == garbage and len(_episodes(out)) == 1   # untouched, nothing played
    rc, _, err = _main([*argv, '--set-aside-corrupt'], capsys); assert rc == 0, err
    aside = list(out.glob(f'{store}.corrupt-*'))
    assert len(aside) == 1 and aside[0].read_bytes() == garbage
    assert [(e['path'],
             e['recorded']) for e in (json.loads(l) for l in (out/'set_aside.jsonl').read_text().splitlines())] == [(store, 1)]
    assert sorted(e['episode'] for e in _episodes(out)) == [0, 1]
    rc, o, e = _main(['check', out], capsys)
    assert rc == 0 and f"set aside: {store}" in o, o + e
