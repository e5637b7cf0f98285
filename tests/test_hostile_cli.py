"""Issue 55: Ctrl-C and `cove serve`'s numbers end in one line, never a traceback."""
import signal, subprocess, sys, time
from pathlib import Path
from conftest import TALLY

COVE = str(Path(sys.executable).parent/'cove')

def _lines(err:str) -> list[str]: return [l for l in err.splitlines() if l.strip() and 'it/s]' not in l]

def test_ctrl_c_is_one_line_and_the_run_resumes(tmp_path, hostile):
    out = tmp_path/'run'
    argv = [COVE, 'run', '--method', 'base', '--tasks', 'math', '--episodes', '400', '--model', 'tiny', '--quiet',
            '--out', str(out)]
    # Ctrl-C's default, whoever started pytest (a background job or nohup starts it with SIGINT ignored)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not (out/'episodes.jsonl').exists() and time.monotonic() < deadline and p.poll() is None: time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    TALLY['tracebacks'] += 'Traceback' in err
    lines = _lines(err)
    assert p.returncode == 130 and 'Traceback' not in err, (p.returncode, err[-1500:])
    assert lines[-1] == 'cove run: interrupted; what was written is kept: rerun the same command to resume', lines
    hostile.refused()

def test_serve_numbers_the_machine_cannot_honour(hostile):
    for args, word in ((['--timeout', 'nan'], '--timeout nan'), (['--threads', '-1'], '--threads -1'),
                       (['--max-lora-rank', '0'], '--max-lora-rank 0'), (['--timeout', 'inf'], '--timeout inf')):
        r = subprocess.run([COVE, 'serve', *args], capture_output=True, text=True, timeout=120)
        TALLY['tracebacks'] += 'Traceback' in r.stderr
        lines = _lines(r.stderr)
        assert r.returncode == 2 and len(lines) == 1 and word in lines[0], (args, r.stderr[-800:])
        hostile.refused()

def test_a_long_stream_says_why_nothing_shows_yet(tmp_path, hostile):
    "`--episodes 100000` draws its tasks before the run folder exists: a line says so within seconds, not minutes."
    argv = [COVE, 'run', '--method', 'base', '--tasks', 'tableqa', '--episodes', '100000', '--model', 'tiny',
            '--out', str(tmp_path/'run')]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first, t = p.stderr.readline(), time.monotonic()   # the first line written, whatever it is
        while first and 'drawing' not in first and time.monotonic() - t < 60: first = p.stderr.readline()
    finally:
        p.kill()
        p.communicate(timeout=60)
    hostile.hung(int('drawing' not in first))
    assert 'drawing 100000 tasks of each of tableqa before the first episode' in first, first
    hostile.refused()
