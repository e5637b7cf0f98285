"`make lab`'s JupyterLab starts on 127.0.0.1, lists the experiment notebooks through its REST API and starts a kernel; nothing leaves localhost."
import json, os, secrets, signal, socket, subprocess, sys, time, urllib.error, urllib.request
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).parent/'jupyter'
# the flags `make lab` passes: no browser, loopback only, no news feed, no update check, no PyPI extension manager
LAB_FLAGS = ['--no-browser', '--ip', '127.0.0.1', '--LabApp.news_url=None', '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate',
             '--LabApp.extension_manager=readonly']

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _api(base, token, path, method='GET', body=None, timeout=10):
    req = urllib.request.Request(base + path, method=method, headers={'Authorization': f'token {token}', 'Content-Type': 'application/json'},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
        return r.status, (json.loads(data) if data else None)

def test_makefile_lab_uses_these_flags():
    mk = (ROOT/'Makefile').read_text()
    lab = mk[mk.index('\nlab:'):].split('\n\n')[0]
    for f in LAB_FLAGS: assert f.split('=')[0] in lab, f

@pytest.mark.timeout(60)
def test_jupyterlab_lists_experiments_and_starts_a_kernel(tmp_path):
    if not JUPYTER.exists() or not (Path(sys.executable).parent/'jupyter-lab').exists():
        pytest.fail('jupyterlab is not installed in this venv: pip install -c constraints.txt -e ".[dev]"')
    port, token = _free_port(), secrets.token_hex(16)
    base = f'http://127.0.0.1:{port}'
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path/'runtime'), JUPYTER_CONFIG_DIR=str(tmp_path/'config'),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path/'settings'), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path/'ws'), OMP_NUM_THREADS='1')
    log = (tmp_path/'lab.log').open('w')
    root = ['--allow-root'] if os.geteuid() == 0 else []   # as `make lab` does in a container running as root
    proc = subprocess.Popen([str(JUPYTER), 'lab', *LAB_FLAGS, *root, '--port', str(port), f'--IdentityProvider.token={token}',
                             f'--ServerApp.root_dir={ROOT}', '--ServerApp.port_retries=0'],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.time()
        while True:                                   # wait for the server
            assert proc.poll() is None, (tmp_path/'lab.log').read_text()[-3000:]
            try:
                if _api(base, token, '/api/status', timeout=2)[0] == 200: break
            except (urllib.error.URLError, ConnectionError, socket.timeout): pass
            assert time.time() - t0 < 30, 'JupyterLab did not answer within 30 s:\n' + (tmp_path/'lab.log').read_text()[-3000:]
            time.sleep(0.3)
        with pytest.raises(urllib.error.HTTPError):  # the token is required
            urllib.request.urlopen(base + '/api/contents/nbs/experiments', timeout=5)
        st, listing = _api(base, token, '/api/contents/nbs/experiments')
        listed = {c['name'] for c in listing['content'] if c['type'] == 'notebook'}
        want = {p.name for p in (ROOT/'nbs'/'experiments').glob('*.ipynb')}
        assert st == 200 and want and want <= listed, (want, listed)
        st, k = _api(base, token, '/api/kernels', 'POST', {'name': 'python3'})
        assert st == 201 and k['id']
        # the kernel runs code: a client on its connection file (loopback ports the server wrote) gets 6*7 back
        from jupyter_client import BlockingKernelClient
        kc = BlockingKernelClient(connection_file=str(tmp_path/'runtime'/f'kernel-{k["id"]}.json'))
        kc.load_connection_file()
        kc.hb_channel.time_to_dead = 10.0   # the client's heartbeat: a kernel slow under a loaded machine is not dead (default 1 s)
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=30)
            out = []
            kc.execute_interactive('print(6*7)', timeout=30, output_hook=lambda m: out.append(m['content'].get('text', '')))
        finally: kc.stop_channels()
        assert kc.ip == '127.0.0.1' and ''.join(out).strip() == '42', out
        state, t1 = None, time.time()
        while state != 'idle' and time.time() - t1 < 10:   # the server saw it too
            state = _api(base, token, f'/api/kernels/{k["id"]}')[1]['execution_state']; time.sleep(0.2)
        assert state == 'idle', state
        assert k['id'] in {x['id'] for x in _api(base, token, '/api/kernels')[1]}
        assert _api(base, token, f'/api/kernels/{k["id"]}', 'DELETE')[0] == 204
        assert k['id'] not in {x['id'] for x in _api(base, token, '/api/kernels')[1]}
        _api(base, token, '/api/shutdown', 'POST')
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try: proc.wait(timeout=10)
            except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait()
        log.close()
