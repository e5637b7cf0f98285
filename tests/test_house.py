"""The house's own tools (issue 44): `tools/split_cells.py` puts one definition per `#| export` cell and
`tools/wrap_long.py` rewraps lines over 120 characters, both without changing the code they touch."""
import ast, json, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def _cell(src, id, kind='code'):
    c = {'cell_type': kind, 'id': id, 'metadata': {}, 'source': src.splitlines(keepends=True)}
    if kind == 'code': c.update(execution_count=None, outputs=[])
    return c

def _nb(path, cells):
    nb = {'cells': cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}
    path.write_text(json.dumps(nb, indent=1))
    return path

def _tool(*args):
    return subprocess.run([sys.executable, str(ROOT/'tools'/args[0]), *map(str, args[1:])], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)

def _code(nb_path, export=True):
    cells = json.loads(Path(nb_path).read_text())['cells']
    srcs = [''.join(c['source']) for c in cells if c['cell_type'] == 'code']
    return [s for s in srcs if s.startswith('#| export') == export]

MULTI = '''#| export
X = 1   # a constant goes with the definition after it

def f(a):
    "F."
    return a + X

# g's comment stays above g
@staticmethod
def g(): return 2

class C:
    "C."
    def m(self): return f(1)'''

def test_split_cells_one_definition_per_cell(tmp_path):
    p = _nb(tmp_path/'a.ipynb', [_cell('# T', 'aaaa0000', 'markdown'), _cell(MULTI, 'bbbb1111'),
                                 _cell('f(1)', 'cccc2222')])
    r = _tool('split_cells.py', p)
    assert r.returncode == 0, r.stderr
    cells = json.loads(p.read_text())['cells']
    exp = _code(p)
    assert len(exp) == 3 and all(s.startswith('#| export\n') for s in exp)
    assert cells[1]['id'] == 'bbbb1111' and 'def f' in exp[0] and 'X = 1' in exp[0]   # the first piece keeps the id
    assert "# g's comment" in exp[1] and '@staticmethod' in exp[1]
    assert exp[2].split('\n', 1)[1].startswith('class C')
    assert len({c['id'] for c in cells}) == len(cells) and cells[-1]['id'] == 'cccc2222'
    strip = lambda s: s.split('\n', 1)[1]
    assert ast.dump(ast.parse('\n'.join(strip(s) for s in exp))) == ast.dump(ast.parse(strip(MULTI)))

def test_split_cells_leaves_what_it_cannot_split(tmp_path):
    src = '#| export\nfor i in range(2): pass\n\ndef f(): return 1\n\ndef g(): return 2'
    p = _nb(tmp_path/'b.ipynb', [_cell(src, 'dddd3333')])
    assert _tool('split_cells.py', p).returncode == 0
    assert _code(p) == [src]   # a top-level `for`: skipped, the cell as it was

LONG = ('def f(alpha, beta, gamma):\n'
        '    return {"alpha": alpha, "beta": beta, "gamma": gamma, "sum": alpha + beta + gamma, '
        '"product": alpha * beta * gamma, "mean": (alpha + beta + gamma) / 3}\n'
        'x = f(1, 2, 3)   # ' + 'a trailing comment that takes the line well past the limit ' * 2 + '\n')

def test_wrap_long_rewraps_only_long_lines(tmp_path):
    p = tmp_path/'test_long.py'
    p.write_text(LONG + 'y = 1\n')
    r = _tool('wrap_long.py', p)
    assert r.returncode == 0, r.stderr
    out = p.read_text()
    assert max(map(len, out.splitlines())) <= 120
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse(LONG + 'y = 1\n'))
    assert out.endswith('y = 1\n') and 'a trailing comment' in out   # short lines and comments kept

def test_wrap_long_in_an_example_cell_not_an_exported_one(tmp_path):
    long_call = 'print(' + ', '.join(f'"item number {i}"' for i in range(12)) + ')'
    p = _nb(tmp_path/'c.ipynb', [_cell('#| export\ndef f(): return ' + repr('z' * 130), 'eeee4444'),
                                 _cell(long_call, 'ffff5555')])
    assert _tool('wrap_long.py', p).returncode == 0
    ex, = _code(p, export=False)
    assert max(map(len, ex.splitlines())) <= 120 and ast.dump(ast.parse(ex)) == ast.dump(ast.parse(long_call))
    assert _code(p) == ['#| export\ndef f(): return ' + repr('z' * 130)]   # exported code: not its business
