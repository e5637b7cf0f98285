"Issue 24, item 5: a failure that is not the task's stops the run (exit 3) and is never recorded as the task's failure."
import contextlib, http.server, json, subprocess, sys, threading, time
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
    assert _cove('run', '--method', 'oracle', '--tasks', 'math', '--episodes', '3', '--out', str(out),
                 '--quiet').returncode == 0
    recs = _recs(out/'episodes.jsonl')
    for r in recs[1:]: r.update(status='error', success=False, message='policy error: ConnectError: refused')
    (out/'episodes.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))   # as an older cove recorded them
    r = _cove('run', '--method', 'oracle', '--tasks', 'math', '--episodes', '3', '--out', str(out), '--quiet')
    assert r.returncode == 0, r.stderr
    again = _recs(out/'episodes.jsonl')
    assert [x['episode'] for x in again] == [0, 1, 2] and not any('policy error' in x['message'] for x in again)
    assert len(_recs(out/'episodes.jsonl.infra')) == 2

class _Drip(http.server.BaseHTTPRequestHandler):
    "Headers at once, then one byte of the answer every 0.5 s: no read ever times out."
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length', 0)))
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', '1000')
        self.end_headers()
        with contextlib.suppress(OSError):   # the client hangs up at its deadline
            for _ in range(1000):
                self.wfile.write(b' ')
                self.wfile.flush()
                time.sleep(0.5)

def test_a_dripping_server_ends_at_the_deadline_with_exit_3(tmp_path, hostile):
    """Issue 42, item 7: a served backend that sends headers and then a byte every few seconds ends the run, not hangs
    it."""
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Drip)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    out, t0 = tmp_path/'r', time.monotonic()
    r = _cove('run', '--method', 'base', '--tasks', 'math', '--episodes', '1', '--out', str(out), '--quiet',
              '--set', 'model.backend=openai', '--set', f'model.base_url=http://127.0.0.1:{srv.server_address[1]}/v1',
              '--set', 'model.name=x', '--set', 'model.timeout=2')
    srv.shutdown()
    assert r.returncode == 3, r.stderr[-2000:]
    assert 'no whole answer within 2 s' in r.stderr and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert time.monotonic() - t0 < 120   # three tries of 2 s and the start, where the drip alone lasts 500 s
    assert _recs(out/'episodes.jsonl') == []
    hostile.refused()
