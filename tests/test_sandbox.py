"Hostile-code tests of `cove.sandbox.run_sandboxed`: every run must return, contained, and the test process must go on."
import json, logging, os, re, socket, subprocess, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest
import cove.sandbox as C
from cove.sandbox import run_sandboxed, run_command_sandboxed, uid_processes

ROOT = os.geteuid() == 0
PROT = run_sandboxed('pass').protections
DROPPED = any(p.startswith('uid ') for p in PROT)
NETNS = any(p.startswith('netns') for p in PROT)
CG_KIND, CG_PARENTS, CG_WHY = C._cgroup_plan()

@pytest.fixture(autouse=True)
def no_cgroup_left():
    "No run's cgroup outlives it, whatever the test did (any found is removed, then reported)."
    yield
    mine = f'cove-sbx-{os.getpid()}-'
    left = sorted({os.path.join(p, d) for p in CG_PARENTS.values() for d in os.listdir(p) if d.startswith(mine)})
    C._cgroup_remove(left)
    assert not left, left

def sandbox_procs() -> list[int]:
    "Live processes started by the sandbox launcher (none may outlive a run)."
    out = []
    for d in os.listdir('/proc'):
        if not d.isdigit() or int(d) == os.getpid(): continue
        try: cmd = Path(f'/proc/{d}/cmdline').read_bytes()
        except OSError: continue
        if b'_sbx_main()' in cmd: out.append(int(d))
    return out

def sandbox_uid_procs(r) -> list[int]:
    "Live (non-zombie) processes of the throw-away uid of result `r`, when privileges were dropped."
    uid = next((int(p.split()[1]) for p in r.protections if p.startswith('uid ')), None)
    return [] if uid is None else uid_processes(uid)

@pytest.fixture
def canary():
    "A directory with a file that sandboxed code will try to destroy by absolute path."
    d = Path(tempfile.mkdtemp(prefix='cove-canary-'))
    f = d/'canary.txt'; f.write_text('alive')
    yield d, f
    import shutil; shutil.rmtree(d, ignore_errors=True)

def test_protections_reported():
    assert {'session+killpg', 'output-cap', 'cpu', 'as', 'fsize', 'core', 'guard'} <= set(PROT), PROT
    if ROOT:
        assert DROPPED and 'uid-sweep' in PROT and 'no_new_privs' in PROT, PROT

def test_ok_stdin_and_workdir():
    r = run_sandboxed("import os, sys\nprint(sys.stdin.read().upper()); print(os.getcwd() == os.environ['HOME'] == "
                      "os.environ['TMPDIR'])\n"
                      "open('scratch.txt', 'w').write('x'); print(os.getcwd())", stdin='abc')
    assert r.status == 'ok' and r.returncode == 0, r
    lines = r.stdout.split('\n')
    assert lines[:2] == ['ABC', 'True'] and 'cove-sbx-' in lines[2]
    assert not Path(lines[2]).exists(), 'the sandbox directory must be removed after the run'

def test_infinite_loop_times_out():
    t0 = time.monotonic()
    r = run_sandboxed('while True: pass', timeout=1.5)
    assert r.status == 'timeout' and time.monotonic() - t0 < 1.5 + 2
    assert not sandbox_procs()

def test_sleeping_loop_times_out_on_wall_clock():
    t0 = time.monotonic()
    r = run_sandboxed('import time\nwhile True: time.sleep(0.1)', timeout=1.0)
    assert r.status == 'timeout' and time.monotonic() - t0 < 3

def test_cpu_limit():
    r = run_sandboxed('while True: pass', timeout=20, cpu_s=1)
    assert r.status == 'timeout' and r.elapsed_s < 5, r

def test_cpu_limit_under_load():
    "The CPU limit reads as `timeout` on a busy core too: decided by the signal that ended the code, not a CPU reading."
    cpu = max(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, '-c', f'import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass'])
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})   # the sandboxes inherit it: three of them and the busy loop share one core
    try:
        with ThreadPoolExecutor(3) as ex:
            rs = list(ex.map(lambda _: run_sandboxed('while True: pass', timeout=20, cpu_s=1), range(3)))
    finally:
        os.sched_setaffinity(0, mine)
        busy.kill(); busy.wait()
    assert [r.status for r in rs] == ['timeout'] * 3 and max(r.elapsed_s for r in rs) < 10, rs

def test_fork_bomb_blocked_by_guard():
    t0 = time.monotonic()
    r = run_sandboxed('import os\nwhile True: os.fork()', timeout=3)
    assert r.status == 'error' and 'sandbox: os.fork is disabled' in r.stderr
    assert time.monotonic() - t0 < 5 and not sandbox_procs()

@pytest.mark.parametrize('guard', [True, False])
def test_fork_bomb_contained_without_guard(guard):
    """With or without the guard, a fork bomb that swallows errors (via `posix`) ends at the timeout and leaves nothing
    behind."""
    before = len(os.listdir('/proc'))
    code = ('import posix, time\nwhile True:\n    try: posix.fork()\n    except Exception: time.sleep(0.01)')
    t0 = time.monotonic()
    r = run_sandboxed(code, timeout=2, guard=guard)
    assert r.status in ('timeout', 'error') and time.monotonic() - t0 < 2 + 3, r
    time.sleep(0.2)
    assert not sandbox_procs() and not sandbox_uid_procs(r)
    assert len(os.listdir('/proc')) < before + 20, 'processes leaked'

@pytest.mark.skipif(not DROPPED,
                    reason='needs the privilege drop (root): only the uid sweep catches a process that left the session')
def test_session_escape_is_swept():
    code = ('import os, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(60)\nelse:\n    print(pid)')
    r = run_sandboxed(code, timeout=3, guard=False)
    assert r.status == 'ok', r
    time.sleep(0.1)
    assert not sandbox_uid_procs(r) and not sandbox_procs()   # (the printed pid is the namespace's, when there is one)

@pytest.mark.skipif(not ROOT, reason='the filesystem view and pid namespace are built as root')
@pytest.mark.parametrize('guard', [True, False])
def test_sees_only_what_it_needs(tmp_path, guard):
    """No read of /etc/shadow, a secret in root's home, the repository or another run's folder; no other process in
    sight."""
    secret = Path.home()/f'.cove-sandbox-probe-{os.getpid()}'
    secret.write_text('s3cret')
    run = tmp_path/'other_run'; run.mkdir(); (run/'episodes.jsonl').write_text('{"episode": 0}\n')
    probes = ['/etc/shadow', str(secret), str(Path(__file__).resolve().parents[1]/'README.md'),
              str(run/'episodes.jsonl')]
    code = (f"import os\nfor p in {probes!r}:\n    try: print('GOT', p, open(p).read(20))\n    except OSError as e: "
            "print('DENIED', p, type(e).__name__)\n"
            "print('PROCS', sorted(d for d in os.listdir('/proc') if d.isdigit()))")
    try: r = run_sandboxed(code, guard=guard)
    finally: secret.unlink()
    assert r.status == 'ok' and {'fs-view', 'pidns'} <= set(r.protections), r
    assert r.stdout.count('DENIED') == len(probes) and 'GOT' not in r.stdout, r.stdout
    # only itself, as pid 1 of its namespace
    assert "PROCS ['1']" in r.stdout, r.stdout
    assert not any('read-only cap' in p for p in r.protections)

@pytest.mark.parametrize('code', ["x = ' ' * 10**10", "l = []\nwhile True: l.append(' ' * 10**6)"])
def test_memory_hog(code):
    r = run_sandboxed(code, timeout=10, memory_mb=256)
    assert r.status == 'memory', r
    assert run_sandboxed('print(1)').stdout == '1\n'

@pytest.mark.parametrize('attack', [
    "os.system('rm -rf ' + CANARY)",
    "shutil.rmtree(CANARY)",
    "os.remove(os.path.join(CANARY, 'canary.txt'))",
    "os.unlink(os.path.join(CANARY, 'canary.txt'))",
    "os.rename(os.path.join(CANARY, 'canary.txt'), 'stolen.txt')",
    "open(os.path.join(CANARY, 'canary.txt'), 'w').write('dead')",
    "subprocess.run(['rm', '-rf', CANARY])",
    "os.chmod(CANARY, 0o777)",
])
def test_destruction_blocked(canary, attack):
    d, f = canary
    r = run_sandboxed(f"import os, shutil, subprocess\nCANARY = {str(d)!r}\n{attack}")
    assert r.status == 'error' and 'PermissionError' in r.stderr and 'sandbox:' in r.stderr, r
    assert f.read_text() == 'alive'

def test_rmtree_home_only_reaches_the_sandbox(canary):
    home = Path.home()
    names = sorted(p.name for p in home.iterdir())
    r = run_sandboxed("import os, shutil\nshutil.rmtree(os.path.expanduser('~'))\nprint(os.path.expanduser('~'))")
    assert 'cove-sbx-' in r.stdout or 'cove-sbx-' in r.stderr, r
    assert home.exists() and sorted(p.name for p in home.iterdir()) == names

@pytest.mark.skipif(not DROPPED, reason='the kernel-level file protection needs the privilege drop (root)')
@pytest.mark.parametrize('attack',
                         ["os.system('rm -rf ' + CANARY)", "shutil.rmtree(CANARY)",
                          "open(os.path.join(CANARY, 'x'), 'w')"])
def test_destruction_blocked_without_guard(canary, attack):
    "The guard off, the throw-away uid alone stops the damage."
    d, f = canary
    r = run_sandboxed(f"import os, shutil\nCANARY = {str(d)!r}\n{attack}", guard=False)
    assert f.read_text() == 'alive' and sorted(p.name for p in d.iterdir()) == ['canary.txt'], r

@pytest.mark.skipif(not DROPPED, reason='needs the privilege drop (root)')
def test_repository_not_writable_without_guard():
    target = Path(__file__).resolve().parent.parent/'settings.ini'
    before = target.read_bytes()
    r = run_sandboxed(f"open({str(target)!r}, 'a').write('# gone')", guard=False)
    assert r.status == 'error' and 'Permission denied' in r.stderr and target.read_bytes() == before

@pytest.fixture
def listener():
    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(5); s.settimeout(0.5)
    yield s
    s.close()

def _no_connection(s) -> bool:
    try: s.accept()
    except socket.timeout: return True
    return False

def test_network_blocked(listener):
    port = listener.getsockname()[1]
    r = run_sandboxed(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hi')")
    assert r.status == 'error' and 'network' in r.stderr, r
    r = run_sandboxed(f"import socket\ns = socket.socket(); s.connect(('127.0.0.1', {port}))")
    assert r.status == 'error' and 'PermissionError' in r.stderr, r
    assert _no_connection(listener)

@pytest.mark.skipif(not NETNS, reason='no network namespace on this machine (only the socket guard)')
def test_network_blocked_by_namespace_without_guard(listener):
    port = listener.getsockname()[1]
    r = run_sandboxed(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'hi')",
                      guard=False)
    assert r.status == 'error' and ('unreachable' in r.stderr or 'refused' in r.stderr), r
    assert _no_connection(listener)

def test_huge_output_capped():
    t0 = time.monotonic()
    r = run_sandboxed("import sys\nsys.stdout.write('x' * 10**8)\nsys.stderr.write('y' * 10**7)", timeout=20)
    assert r.status == 'ok' and r.truncated, r.status
    assert len(r.stdout) < (1 << 16) + 100 and len(r.stderr) < (1 << 16) + 100 and 'truncated' in r.stdout
    r = run_sandboxed("while True: print('spam' * 100)", timeout=1.5)
    assert r.status == 'timeout' and r.truncated and len(r.stdout) < (1 << 16) + 100
    assert time.monotonic() - t0 < 20

def test_file_size_limit():
    r = run_sandboxed("open('big.bin', 'wb').write(b'0' * (64 << 20))", file_mb=4)
    assert r.status == 'error', r

def test_segfault_is_an_error():
    r = run_sandboxed("import ctypes\nctypes.string_at(0)")
    assert r.status == 'error' and r.returncode == -11, r
    assert run_sandboxed('print(2)').stdout == '2\n'

def test_exit_codes_and_syntax_errors():
    assert run_sandboxed('import sys\nsys.exit(3)').returncode == 3
    r = run_sandboxed('def f(:\n  pass')
    assert r.status == 'error' and 'SyntaxError' in r.stderr

def test_concurrent_runs_do_not_interfere():
    "Threads running sandboxes at once (as `check_gold` does) each get their own output and report."
    def one(i):
        r = run_sandboxed(f"__cove_report__({{'i': {i}}})\nprint({i} * 2)")
        return r.status, r.stdout.strip(), r.report
    with ThreadPoolExecutor(6) as ex: res = list(ex.map(one, range(24)))
    assert res == [('ok', str(2 * i), [{'i': i}]) for i in range(24)]

def test_passed_fds_and_no_report():
    "`pass_fds` reach the code at their numbers and are closed here; `report=False` leaves it no report pipe."
    rd, wr = os.pipe()
    code = (f"import os\nos.write({wr}, b'hi')\nprint('__cove_report__' in globals())\n"
            "print(sorted(int(f) for f in os.listdir('/proc/self/fd') if int(f) > 2))")
    r = run_sandboxed(code, pass_fds=(wr,), report=False)
    try:
        assert r.status == 'ok' and r.stdout.split('\n')[0] == 'False' and r.report == [], r
        assert os.read(rd, 10) == b'hi' and os.read(rd, 10) == b''   # EOF: no copy of the write end is left anywhere
        with pytest.raises(OSError): os.fstat(wr)
    finally: os.close(rd)
    r = run_sandboxed("__cove_report__({'x': 1})")
    assert r.report == [{'x': 1}]

def test_command_mode():
    r = run_command_sandboxed(['/bin/cat', 'a.txt'], files={'a.txt': 'from a file'}, timeout=10)
    assert (r.status, r.stdout) == ('ok', 'from a file'), r
    r = run_command_sandboxed(['/bin/sleep', '30'], timeout=1)
    assert r.status == 'timeout' and r.elapsed_s < 3
    with pytest.raises(ValueError, match='absolute path'): run_command_sandboxed(['cat'])

def test_large_stdin():
    data = 'x' * (4 << 20)
    r = run_sandboxed('import sys\nprint(len(sys.stdin.read()))', stdin=data, timeout=10)
    assert r.stdout.strip() == str(len(data))

def test_setup_failure_raises(monkeypatch):
    "A launcher that dies before running the code is the sandbox's failure, not the code's: it raises."
    import cove.sandbox as C
    monkeypatch.setattr(C, '_runner_source', lambda: 'import sys\nsys.stderr.write("boom")\nsys.exit(5)')
    with pytest.raises(C.SandboxError, match='boom'): C.run_sandboxed('print(1)')

def test_without_privilege_drop_still_contained(canary):
    "The fallback when cove does not run as root: limits, session kill and guard still hold."
    d, f = canary
    r = run_sandboxed('while True: pass', timeout=1, drop_privileges=False)
    assert r.status == 'timeout' and not any(p.startswith('uid ') for p in r.protections)
    r = run_sandboxed(f"import shutil\nshutil.rmtree({str(d)!r})", drop_privileges=False)
    assert r.status == 'error' and f.read_text() == 'alive'
    assert not sandbox_procs()

DISK_CODE = """import os
n = 0
try:
    while n < 100:
        with open(f'f{n}.bin', 'wb') as f: f.write(b'x' * (1 << 20))
        n += 1
finally:
    os.write(CW, f'{os.getcwd()} {n}'.encode()); os.close(CW)
    os.read(GR, 1)
"""

@pytest.mark.skipif('disk-quota' not in PROT, reason='no disk quota here: a tmpfs needs root and a mount namespace')
def test_disk_quota_stops_writes_off_the_host_disk():
    """1 MB files written until it fails stop at `disk_mb` (ENOSPC), named in the error; the host's folder never sees
    one."""
    (cr, cw), (gr, gw) = os.pipe(), os.pipe()   # the code tells its folder and count, then waits for the go-ahead
    code = DISK_CODE.replace('CW', str(cw)).replace('GR', str(gr))
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(run_sandboxed, code, disk_mb=8, timeout=20, pass_fds=(cw, gr))
        try:
            where, _, n = os.read(cr, 4096).decode().rpartition(' ')
            on_host = sorted(os.listdir(where)) if where else None   # while the code still runs, its files written
        finally:
            try: os.write(gw, b'g')
            except BrokenPipeError: pass
            os.close(gw); os.close(cr)
        r = fut.result()
    assert 'cove-sbx-' in where and 6 <= int(n) <= 8 and on_host == ['.stdin', 'main.py'], (where, n, on_host, r)
    assert r.status == 'error' and 'No space left on device' in r.stderr and 'disk quota reached (8 MB)' in r.stderr, r
    r = run_command_sandboxed(['/bin/sh', '-c', 'head -c 20000000 /dev/zero > big'], disk_mb=4, timeout=10)
    assert r.status == 'error' and 'disk quota reached (4 MB)' in r.stderr, r

KIDS = """import os, select, sys, time
r, w = os.pipe()
kids = {}
for i in range(8):
    pid = os.fork()
    if pid == 0:
        os.close(r)
        b = b'x' * (100 << 20)   # written, so resident
        os.write(w, bytes([i]))
        time.sleep(10)
        os._exit(0)
    kids[pid] = i
os.close(w)
def gone(): return {i for p, i in kids.items() if i not in dead and os.waitpid(p, os.WNOHANG)[0]}
held, dead, t0 = set(), set(), time.monotonic()
while len(held | dead) < 8 and time.monotonic() - t0 < 5:   # until each child holds its 100 MB or is dead
    if select.select([r], [], [], 0.05)[0]: held |= set(os.read(r, 8))
    dead |= gone()
time.sleep(0.1)
dead |= gone()
print('alive', 8 - len(dead), flush=True)
for p, i in kids.items():
    if i not in dead: os.kill(p, 9)
sys.exit(3 if dead else 0)
"""

@pytest.mark.skipif('memory-total' not in PROT, reason=f'no cgroup for a memory total here ({CG_WHY})')
def test_memory_total_over_forked_children():
    """Eight forked children of 100 MB each: under memory_mb=512 at most five live at once (RLIMIT_AS lets each have 512
    MB)."""
    t0 = time.monotonic()
    r = run_sandboxed(KIDS, timeout=15, memory_mb=512, guard=False)
    alive = re.search(r'alive (\d+)', r.stdout)   # none: the whole group was killed (cgroup2's memory.oom.group)
    assert r.status == 'memory' and 'OOM-killed' in r.stderr and (alive is None or int(alive.group(1)) <= 5), r
    r = run_sandboxed(KIDS, timeout=15, memory_mb=1024, guard=False)   # the same program, room for all eight
    assert r.status == 'ok' and r.stdout == 'alive 8\n' and 'OOM' not in r.stderr, r
    assert time.monotonic() - t0 < 15

def test_protections_name_the_totals(monkeypatch, caplog):
    "Which totals held is in `protections`: the disk quota or `disk:per-file-only`, the memory total or per process."
    assert ('disk-quota' in PROT) == DROPPED and ('disk:per-file-only' in PROT) != DROPPED, PROT
    assert ('memory-total' in PROT) == bool(CG_KIND) != ('memory:per-process-only' in PROT), (PROT, CG_WHY)
    assert ('pids-total' in PROT) == ('pids' in CG_PARENTS), PROT
    monkeypatch.setattr(C, '_WARNED', set())
    monkeypatch.setattr(C, '_cgroup_plan', lambda: ('', {}, 'cgroups off for this test'))
    with caplog.at_level(logging.WARNING, logger='cove.sandbox'):
        rs = [run_sandboxed(f'print({i})', drop_privileges=False) for i in range(2)]
    for r in rs:
        assert r.ok and {'disk:per-file-only', 'memory:per-process-only'} <= set(r.protections), r
        assert not {'disk-quota', 'memory-total', 'pids-total'} & set(r.protections), r
    warned = [r.getMessage() for r in caplog.records if r.name == 'cove.sandbox']
    assert len(warned) == 2 and 'no disk quota' in warned[0] and 'cgroups off for this test' in warned[1], warned

FIRST_CALLERS = '''
import json, os, sys, threading, time
_mkdir = os.mkdir
def slow_mkdir(p, *a, **k):   # widens the window in which first callers of the cgroup plan meet
    _mkdir(p, *a, **k)
    if 'cove-sbx-probe' in str(p): time.sleep(0.3)
os.mkdir = slow_mkdir
from cove.sandbox import run_sandboxed
out, barrier = [], threading.Barrier(3)
def go():
    barrier.wait()
    try: out.append(sorted(set(run_sandboxed("print(1)", timeout=30).protections) & {"memory-total", "pids-total"}))
    except Exception as e: out.append(f"{type(e).__name__}: {e}")
ts = [threading.Thread(target=go) for _ in range(3)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(out))
'''

@pytest.mark.skipif(not CG_KIND, reason=f'no cgroup totals here ({CG_WHY})')
def test_cgroup_plan_made_once_under_a_lock():
    """Issue 55: 8 fresh processes, 3 threads each, all first callers at once (the probe slowed): every run has its
    memory and process totals, and none fails to start (the launcher's source is made once too)."""
    code = [sys.executable, '-c', FIRST_CALLERS]
    env = {**os.environ, 'OMP_NUM_THREADS': '1'}
    ps = [subprocess.Popen(code, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(8)]
    outs = [p.communicate(timeout=300) for p in ps]
    runs = [run for o, _ in outs for run in (json.loads(o) if o.strip() else ['no output'])]
    want = sorted({'memory-total', 'pids-total'} & {f'{c}-total' for c in CG_PARENTS})
    bad = [r for r in runs if r != want]
    assert len(runs) == 24 and not bad, (len(bad), bad[:3], [e[-300:] for _, e in outs if e][:2])
