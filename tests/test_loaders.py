"""Issue 24, item 8: loaders name the file and the row, count a bad row, refuse an unusable set and paths outside the
data."""
from pathlib import Path
import pytest
from cove.tasks.base import jsonl_rows, load_rows
from cove.tasks.tableqa import WTQTableQA
from cove.core import Task

HEAD = 'id\tutterance\tcontext\ttargetValue\n'

def _wtq(root:Path, rows:list[bytes]) -> Path:
    "A synthetic WTQ folder: one table inside it, a secret outside, and the question rows given."
    (root/'wtq'/'csv').mkdir(parents=True)
    (root/'wtq'/'csv'/'t.csv').write_text('Name,Age\nAda,36\nBob,41\n')
    (root/'secret.csv').write_text('Key,Value\npassword,hunter2\n')
    for f in ('training.tsv', 'random-split-1-dev.tsv'): (root/'wtq'/f).write_bytes(HEAD.encode() + b''.join(rows))
    return root/'wtq'

def test_bad_byte_is_a_counted_row_naming_the_file(tmp_path):
    (tmp_path/'x.jsonl').write_bytes(b'{"q": "a"}\n{"q": "\xff"}\n')
    ts, rep = load_rows(jsonl_rows(tmp_path/'x.jsonl'), lambda r: Task(r['q'], 'toy', 'test', r['q']), 'toy')
    assert len(ts) == 1 and rep.n_bad == 1 and rep.errors[0].startswith('x.jsonl:2') and 'not UTF-8' in rep.errors[0]

def test_set_with_no_usable_row_is_an_error(tmp_path):
    (tmp_path/'x.jsonl').write_text('not json\n{"nope": 1}\n')
    with pytest.raises(ValueError, match='no usable row'):
        load_rows(jsonl_rows(tmp_path/'x.jsonl'), lambda r: Task(r['q'], 'toy', 'test', r['q']), 'toy')

def test_wtq_rows(tmp_path, hostile):
    d = _wtq(tmp_path, [b'q1\twho is oldest?\tcsv/t.csv\tBob\n', b'q2\tthe password?\t../secret.csv\thunter2\n',
                        b'q3\tb\xe9d?\tcsv/t.csv\tAda\n'])
    env = WTQTableQA(d)
    ts = env.tasks('test')
    assert [t.meta['wtq_id'] for t in ts] == ['q1']
    assert env.report.n_bad == 2
    errs = ' | '.join(env.report.errors)
    assert 'outside the data folder' in errs and 'not UTF-8' in errs and 'random-split-1-dev.tsv:4' in errs
    assert not any('hunter2' in t.prompt for t in ts)
    hostile.refused(2)

def test_wtq_all_rows_bad(tmp_path):
    d = _wtq(tmp_path, [b'q2\tthe password?\t../secret.csv\thunter2\n'])
    with pytest.raises(ValueError, match='no usable row'): WTQTableQA(d).tasks('test')
