"""`make lab`'s JupyterLab starts on 127.0.0.1 with tools/lab's settings, lists the experiment notebooks through its REST
API, saves a notebook opened and saved unchanged without dirtying git, asks nothing about news, and starts a kernel whose
progress bars are widgets; nothing leaves localhost."""
import json, os, secrets, signal, socket, subprocess, sys, time, urllib.error, urllib.request
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
JUPYTER = Path(sys.executable).parent/'jupyter'
# what `make lab` runs: its flags (no browser, loopback only) and its settings folder (the save hook; no news feed, no
# update
# check, no PyPI extension manager)
LAB_FLAGS = ['--no-browser', '--ip', '127.0.0.1']
LAB_CONFIG = ROOT/'tools'/'lab'
SAVED = 'nbs/experiments/api_renaming.ipynb'   # the notebook the reader opened and saved

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _api(base, token, path, method='GET', body=None, timeout=10):
    req = urllib.request.Request(base + path, method=method,
                                 headers={'Authorization': f'token {token}', 'Content-Type': 'application/json'},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=timeout) as r:
        data = r.read()
        return r.status, (json.loads(data) if data else None)

def test_makefile_lab_uses_these_flags():
    mk = (ROOT/'Makefile').read_text()
    lab = mk[mk.index('\nlab:'):].split('\n\n')[0]
    for f in LAB_FLAGS: assert f.split('=')[0] in lab, f
    assert 'JUPYTER_CONFIG_PATH=$(CURDIR)/tools/lab ' in lab and (LAB_CONFIG/'jupyter_server_config.py').exists()

def _as_the_lab_saves_it(nb:dict) -> dict:
    "What JupyterLab's frontend puts into a notebook it opened and ran one cell of, before it autosaves it."
    nb['metadata']['kernelspec'] = {'display_name': 'Python 3 (ipykernel)', 'language': 'python', 'name': 'python3'}
    nb['metadata']['language_info'] = {'codemirror_mode': {'name': 'ipython', 'version': 3}, 'file_extension': '.py',
                                       'mimetype': 'text/x-python', 'name': 'python', 'nbconvert_exporter': 'python',
                                       'pygments_lexer': 'ipython3', 'version': '3.11.0'}
    next(c for c in nb['cells'] if c['cell_type'] == 'code')['execution_count'] = 1
    return nb

@pytest.mark.timeout(90)
def test_jupyterlab_lists_saves_clean_and_starts_a_kernel(tmp_path):
    if not JUPYTER.exists() or not (Path(sys.executable).parent/'jupyter-lab').exists():
        pytest.fail('jupyterlab is not installed in this venv: pip install -c constraints.txt -e ".[dev]"')
    repo = tmp_path/'repo'   # a clone, so that a save the hook failed to clean cannot dirty this tree
    subprocess.run(['git', 'clone', '-q', '--local', str(ROOT), str(repo)], check=True)
    port, token = _free_port(), secrets.token_hex(16)
    base = f'http://127.0.0.1:{port}'
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path/'runtime'), JUPYTER_CONFIG_DIR=str(tmp_path/'config'),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path/'settings'), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path/'ws'),
               OMP_NUM_THREADS='1', JUPYTER_CONFIG_PATH=str(LAB_CONFIG))
    log = (tmp_path/'lab.log').open('w')
    root = ['--allow-root'] if os.geteuid() == 0 else []   # as `make lab` does in a container running as root
    proc = subprocess.Popen([str(JUPYTER), 'lab', *LAB_FLAGS, *root, '--port', str(port),
                             f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={repo}',
                             '--ServerApp.port_retries=0'],
                            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
        want = {p.name for p in (repo/'nbs'/'experiments').glob('*.ipynb')}
        assert st == 200 and want and want <= listed, (want, listed)
        # the news pop-up and the update check are off in the lab's settings
        st, note = _api(base, token, '/lab/api/settings/@jupyterlab/apputils-extension:notification')
        # the overrides are the schema's defaults; no user setting overrides them here
        props = note['schema']['properties']
        assert (st == 200 and props['fetchNews']['default'] == 'false'
                and props['checkForUpdates']['default'] is False), props
        # open a notebook and save it as the lab would, unchanged but for what its frontend adds: git stays clean
        st, model = _api(base, token, f'/api/contents/{SAVED}?content=1')
        lab_nb = _as_the_lab_saves_it(model['content'])
        st, saved = _api(base, token, f'/api/contents/{SAVED}', 'PUT',
                         {'type': 'notebook', 'format': 'json', 'content': lab_nb})
        assert st == 200 and saved['path'] == SAVED
        git = lambda *a: subprocess.run(['git', '-C', str(repo), *a], capture_output=True, text=True, check=True).stdout
        assert git('status', '--porcelain') == '', git('diff')
        import nbformat   # the same save without the hook: the tree is dirty (so the check above can fail)
        nbformat.write(nbformat.from_dict(lab_nb), str(repo/SAVED))
        assert 'language_info' in git('diff') and git('status', '--porcelain').strip() == f'M {SAVED}'
        st, k = _api(base, token, '/api/kernels', 'POST', {'name': 'python3'})
        assert st == 201 and k['id']
        # the kernel runs code: a client on its connection file (loopback ports the server wrote) gets 6*7 back
        from jupyter_client import BlockingKernelClient
        kc = BlockingKernelClient(connection_file=str(tmp_path/'runtime'/f'kernel-{k["id"]}.json'))
        kc.load_connection_file()
        # the client's heartbeat: a kernel slow under a loaded machine is not dead (default 1 s)
        kc.hb_channel.time_to_dead = 10.0
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=30)
            out = []
            kc.execute_interactive('print(6*7)', timeout=30,
                                   output_hook=lambda m: out.append(m['content'].get('text', '')))
            msgs = []   # a progress bar is a widget (ipywidgets is installed), with no "IProgress not found" warning
            kc.execute_interactive('from tqdm.auto import tqdm\nfor _ in tqdm(range(2)): pass', timeout=30,
                                   output_hook=msgs.append)
        finally: kc.stop_channels()
        assert kc.ip == '127.0.0.1' and ''.join(out).strip() == '42', out
        stderr = ''.join(m['content'].get('text', '') for m in msgs if m['content'].get('name') == 'stderr')
        kinds = {k for m in msgs if m['msg_type'] == 'display_data' for k in m['content']['data']}
        assert 'IProgress' not in stderr and 'application/vnd.jupyter.widget-view+json' in kinds, (stderr, kinds)
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
