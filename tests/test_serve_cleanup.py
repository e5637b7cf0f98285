"""A run killed while it holds a vLLM server leaves no server process behind (issue 54, item 5).

The real `vllm_server` / `VLLMServer.start` / `cove serve` code paths run against a stand-in vLLM: a venv whose
`bin/python` is a small script that takes vLLM's argv, starts a worker process (as vLLM's engine core is) and answers
`/v1/models` on the loopback port it is given, or never answers (`FAKE_VLLM_SLOW=1`: a server still starting). Its
server ignores nothing and kills nothing: only the process-group kill can end its worker. A driver process starts it,
is sent SIGTERM, SIGINT or SIGHUP (in start-up or once the server answers) or raises, and the test checks that the
server and its worker are gone. The last test does the same with real vLLM (`.venv-vllm`, `make vllm`) and skips
where it is not installed."""
import json, os, signal, subprocess, sys, textwrap, time
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE = '''
import http.server, json, os, subprocess, sys
port = int(sys.argv[sys.argv.index('--port') + 1])
worker = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
with open(os.environ['FAKE_VLLM_PIDS'], 'w') as f: json.dump([os.getpid(), worker.pid], f)
if os.environ.get('FAKE_VLLM_SLOW'):
    import time; time.sleep(600)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', port), H).serve_forever()
'''

DRIVER = '''
import sys, time
from cove.serve import vllm_server
with vllm_server(None, model=sys.argv[1], venv=sys.argv[2], timeout=120) as url:
    print('ready', url, flush=True)
    if sys.argv[3] == 'raise': raise RuntimeError('the run failed')
    time.sleep(600)
'''


@pytest.fixture
def fake_vllm(tmp_path):
    "A stand-in vLLM venv, a model folder to serve, and where its server writes its pids."
    py = tmp_path/'venv'/'bin'/'python'
    py.parent.mkdir(parents=True)
    py.write_text(f'#!{sys.executable}\n' + FAKE)
    py.chmod(0o755)
    (tmp_path/'model').mkdir()
    return tmp_path/'venv', tmp_path/'model', tmp_path/'pids.json'


def _alive(pid:int) -> bool:
    "Whether `pid` is a process that is not a zombie."
    try: state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError): return False
    return state != 'Z'


def _pids(path:Path, timeout:float=60) -> list[int]:
    "The server's and its worker's pids, once written."
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip(): return json.loads(path.read_text())
        time.sleep(0.1)
    raise AssertionError('the stand-in server never started')


def _gone(pids:list[int], timeout:float=30) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(map(_alive, pids)): return True
        time.sleep(0.2)
    return False


def _dispositions(ignored:tuple):
    "For the child: SIGHUP and SIGINT at their defaults (pytest may run under nohup or in the background), or ignored."
    def reset():
        for sig in (signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
    return reset

def _start(argv:list[str], pids:Path, slow:bool, ignored:tuple=()) -> subprocess.Popen:
    env = {**os.environ, 'FAKE_VLLM_PIDS': str(pids), 'OMP_NUM_THREADS': '1'}
    env.pop('FAKE_VLLM_SLOW', None)
    if slow: env['FAKE_VLLM_SLOW'] = '1'
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_dispositions(ignored))


@pytest.mark.parametrize('when', ['starting', 'serving'])
@pytest.mark.parametrize('sig', [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signalled_run_stops_its_server(fake_vllm, sig, when):
    venv, model, pids_file = fake_vllm
    p = _start([sys.executable, '-c', DRIVER, str(model), str(venv), 'sleep'], pids_file, slow=when == 'starting')
    try:
        pids = _pids(pids_file)
        if when == 'serving': assert p.stdout.readline().startswith('ready http://127.0.0.1:')
        assert all(map(_alive, pids))
        p.send_signal(sig)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill()
    assert _gone(pids), f'left running after {sig.name} while {when}: {[q for q in pids if _alive(q)]}'
    assert f'cove: {sig.name}: stopped the vLLM server(s) this process started (pid {pids[0]})' in err, err
    assert p.returncode == -sig   # ended by the signal, as without cove's handler (SIGINT: via KeyboardInterrupt)


def test_a_run_under_nohup_keeps_its_server_on_sighup(fake_vllm):
    "A process that ignores SIGHUP (`nohup`) goes on after one, and so does the server it started."
    venv, model, pids_file = fake_vllm
    p = _start([sys.executable, '-c', DRIVER, str(model), str(venv), 'sleep'], pids_file, slow=False,
               ignored=(signal.SIGHUP,))
    try:
        pids = _pids(pids_file)
        assert p.stdout.readline().startswith('ready http://127.0.0.1:')
        p.send_signal(signal.SIGHUP)
        time.sleep(2)
        assert p.poll() is None and all(map(_alive, pids))
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None: p.kill()
    assert _gone(pids) and p.returncode == -signal.SIGTERM, (p.returncode, err)

def test_an_exception_stops_the_server(fake_vllm):
    venv, model, pids_file = fake_vllm
    p = _start([sys.executable, '-c', DRIVER, str(model), str(venv), 'raise'], pids_file, slow=False)
    out, err = p.communicate(timeout=120)
    pids = _pids(pids_file)
    assert 'RuntimeError: the run failed' in err and p.returncode == 1
    assert _gone(pids), [q for q in pids if _alive(q)]


def test_cove_serve_sigterm_in_start_up(fake_vllm):
    "`cove serve` ended with SIGTERM while vLLM is still starting leaves nothing running."
    venv, model, pids_file = fake_vllm
    cove = Path(sys.executable).parent/'cove'   # the console script of this venv
    argv = [str(cove), 'serve', '--venv', str(venv), '--model', str(model), '--timeout', '120']
    p = _start(argv, pids_file, slow=True)
    try:
        pids = _pids(pids_file)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill()
    assert _gone(pids), [q for q in pids if _alive(q)]
    assert p.returncode == -signal.SIGTERM and 'stopped the vLLM server' in err, (p.returncode, err)


VLLM_VENV = Path(os.environ.get('COVE_VLLM_VENV') or ROOT/'.venv-vllm')


def _descendants(pid:int) -> set[int]:
    "Every process below `pid` now (from /proc)."
    kids = {}
    for d in Path('/proc').iterdir():
        if d.name.isdigit():
            try: ppid = int((d/'stat').read_text().rsplit(')', 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, IndexError): continue
            kids.setdefault(ppid, set()).add(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for k in kids.get(todo.pop(), ()):
            if k not in out: out.add(k); todo.append(k)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not (VLLM_VENV/'bin'/'python').exists(),
                    reason=f'vLLM is not installed: no {VLLM_VENV}/bin/python (`make vllm`: about 2 minutes, 2.4 GB)')
def test_real_vllm_killed_in_start_up_leaves_nothing():
    "SIGTERM to a run while real vLLM loads the embedded model: vLLM's server and its engine workers all end."
    p = subprocess.Popen([sys.executable, '-c', DRIVER, 'smollm2-135m', str(VLLM_VENV), 'sleep'], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(20)   # vLLM's API server has started its engine process by now
        below = _descendants(p.pid)
        assert below, 'no vLLM process started'
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None: p.kill()
    assert _gone(list(below), timeout=60), [q for q in below if _alive(q)]
