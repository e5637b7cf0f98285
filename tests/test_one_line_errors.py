"Issue 24, item 7: what used to end in a traceback ends in one line and a stated exit code."
import importlib.util, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')
RUN = [COVE, 'run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--quiet']

def _one_line(r, code, *words):
    "`r` ended in one line naming `words`, with exit `code`; counted as a hostile input refused."
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == code and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-1500:])
    assert all(w in lines[0] for w in words), lines[0]
    from conftest import Hostile
    Hostile().refused()

def _cove(argv, cwd=ROOT): return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)

def test_out_is_a_file_or_under_one_or_empty(tmp_path):
    (tmp_path/'f').write_text('')
    _one_line(_cove(RUN + ['--out', str(tmp_path/'f')]), 2, 'is a file')
    _one_line(_cove(RUN + ['--out', str(tmp_path/'f'/'run')]), 2, 'lies under')
    _one_line(_cove(RUN + ['--out', ''], cwd=tmp_path), 2, "--out ''")
    assert sorted(p.name for p in tmp_path.iterdir()) == ['f']   # nothing written into the current folder
    _one_line(_cove([COVE, 'demo', '--out', '']), 2, "--out ''")

def test_backend_that_cannot_run_here(tmp_path):
    r = _cove([COVE, 'run', '--method', 'base', '--tasks', 'math', '--episodes', '1', '--model', 'tiny', '--quiet',
               '--out', str(tmp_path/'c'), '--set', 'model.device=cuda'])
    import torch
    if torch.cuda.is_available(): pytest.skip('this machine has CUDA')
    _one_line(r, 2, 'no CUDA device')
    if importlib.util.find_spec('vllm') is None:
        _one_line(_cove([COVE, 'run', '--method', 'base', '--tasks', 'math', '--episodes', '1', '--profile', 'gpu',
                         '--quiet', '--out', str(tmp_path/'g')]), 2, 'needs vllm')
    assert not (tmp_path/'c').exists() and not (tmp_path/'g').exists()

@pytest.mark.parametrize('line,why', [('{}', 'not an episode record'), ('[1, 2]', 'not an episode record'),
                                      (None, 'recorded twice')])
def test_bad_episode_lines(tmp_path, line, why):
    out = tmp_path/'r'
    assert _cove(RUN + ['--out', str(out)]).returncode == 0
    p = out/'episodes.jsonl'
    extra = p.read_text().splitlines()[0] if line is None else line
    p.write_text(p.read_text() + extra + '\n')
    _one_line(_cove(RUN + ['--out', str(out)]), 2, why)

def test_huge_stream_is_refused_with_its_limit(tmp_path):
    _one_line(_cove(RUN[:6] + ['--episodes', '100000000', '--quiet', '--out', str(tmp_path/'r')]), 2, '<= 100000')
