"Issue 24, item 7: what used to end in a traceback ends in one line and a stated exit code."
import importlib.util, os, subprocess, sys
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

# Issue 42, item 6: everything checkable is checked before the run folder exists (exit 2, one line, nothing left).
MEMRL = [COVE, 'run', '--method', 'memrl', '--tasks', 'math', '--episodes', '1', '--model', 'tiny', '--quiet']

def _files(tmp_path):
    (tmp_path/'notes.txt').write_text('not a store\n')
    (tmp_path/'empty.sqlite').write_bytes(b'')
    import sqlite3
    with sqlite3.connect(tmp_path/'other.sqlite') as c: c.execute('CREATE TABLE notes (x)')

@pytest.mark.parametrize('sets,words', [
    (['memrl.q_min=abc'], ['memrl.q_min', 'abc']),
    (['memrl.sim_stats=abc', 'memrl.norm=authors'], ['memrl.sim_stats', 'abc']),
    (['memrl.sim_stats=abc'], ['memrl.sim_stats']),
    (['memrl.freeze=true', 'memrl.source={tmp}/missing'], ['memrl.source', 'does not exist']),
    (['memrl.freeze=true', 'memrl.source={tmp}/notes.txt'], ['memrl.source', 'not a MemRL memory']),
    (['memrl.freeze=true', 'memrl.source={tmp}/other.sqlite'], ['memrl.source', 'not a MemRL memory']),
    (['memrl.freeze=true', 'memrl.source={tmp}/empty.sqlite'], ['memrl.source', 'no memory']),
    (['memrl.freeze=true'], ['memrl.freeze', 'memrl.source']),
    (['memrl.source={tmp}/missing'], ['memrl.source', 'does not exist']),
])
def test_memrl_keys_checked_before_the_folder(tmp_path, sets, words):
    _files(tmp_path)
    out = tmp_path/'r'
    args = [a for s in sets for a in ('--set', s.format(tmp=tmp_path))]
    _one_line(_cove(MEMRL + args + ['--out', str(out)]), 2, *words)
    assert not out.exists()

@pytest.mark.parametrize('sets,words', [
    (['model.backend=openai'], ['model.base_url']),
    (['model.backend=openai', 'model.base_url=file:///etc/passwd'], ['model.base_url', 'http']),
    (['model.backend=openai', 'model.base_url=localhost:8000/v1'], ['model.base_url', 'http']),
])
def test_backend_settings_checked_before_the_folder(tmp_path, sets, words):
    out = tmp_path/'r'
    args = [a for s in sets for a in ('--set', s)]
    _one_line(_cove([COVE, 'run', '--method', 'base', '--tasks', 'math', '--episodes', '1', '--quiet', *args,
                     '--out', str(out)]), 2, *words)
    assert not out.exists()

@pytest.mark.parametrize('kind', ['folder', 'fifo'])
def test_dataset_file_that_is_not_a_file(tmp_path, kind):
    "A folder or a FIFO in place of a dataset file: one line naming it, exit 2, never a traceback or a hang."
    f = tmp_path/'data'/'gsm8k'/'train.jsonl'
    f.parent.mkdir(parents=True)
    f.mkdir() if kind == 'folder' else os.mkfifo(f)
    out = tmp_path/'r'
    r = _cove(RUN[:5] + ['math:gsm8k'] + RUN[6:] + ['--set', f"data.dir={tmp_path/'data'}", '--out', str(out)])
    _one_line(r, 2, 'train.jsonl', 'not a regular file')
    assert not out.exists()

def test_bad_question_rows_are_counted_skips(tmp_path):
    "Issue 42, item 7: a row whose `question` is not text is a counted skip naming the row, never `str(value)`."
    import json
    from cove.tasks.math import GSM8KEnv
    from cove.tasks.multihop import parse_hotpot_row
    bad = [{}, [], None, 3, True]
    (tmp_path/'gsm8k').mkdir()
    rows = [dict(question=q, answer='#### 1') for q in bad] + [dict(question='One?', answer='#### 1')]
    (tmp_path/'gsm8k'/'train.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    env = GSM8KEnv(data_dir=tmp_path)
    tasks = env.load()
    assert [t.prompt for t in tasks] == ['One?']
    assert env.report.n_bad == 5 and all('question' in e for e in env.report.errors), env.report.errors
    assert [e.split(':')[1] for e in env.report.errors] == ['1', '2', '3', '4', '5']
    row = dict(_id='a', answer='x', context=[['T', ['s.']]])
    for q in bad:
        with pytest.raises(ValueError, match='question'): parse_hotpot_row(row | dict(question=q))
