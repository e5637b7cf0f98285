"Notebooks are edited in place: `tools/nbcells.py check` fails when an unchanged cell gets a new id (issue 12)."
import importlib.util, json, subprocess, uuid
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('nbcells', ROOT/'tools'/'nbcells.py')
nbcells = importlib.util.module_from_spec(spec)
spec.loader.exec_module(nbcells)

def _nb(cells): return dict(cells=[dict(cell_type='code', id=i, metadata={}, outputs=[], execution_count=None,
                                        source=nbcells.lines(s))
                                   for i, s in cells], metadata={}, nbformat=4, nbformat_minor=5)

def test_renumbered_finds_regenerated_ids():
    old = _nb([('a1', 'x = 1'), ('b2', 'y = 2'), ('c3', 'z = 3')])
    edited = _nb([('a1', 'x = 1'), ('b2', 'y = 20'), ('c3', 'z = 3')])                 # one cell changed in place
    # the same edit by regenerating
    regenerated = _nb([(uuid.uuid4().hex[:8], s) for s in ('x = 1', 'y = 20', 'z = 3')])
    assert nbcells.renumbered(old, edited) == []
    assert [(o, line) for o, _, line in nbcells.renumbered(old, regenerated)] == [('a1', 'x = 1'), ('c3', 'z = 3')]

def test_check_on_a_repository(tmp_path):
    git = lambda *a: subprocess.run(['git', *a], cwd=tmp_path, check=True, capture_output=True)
    git('init', '-q'); git('config', 'user.email', 't@t'); git('config', 'user.name', 't')
    p = tmp_path/'n.ipynb'; nbcells.save(p, _nb([('a1', 'x = 1'), ('b2', 'y = 2')]))
    git('add', '.'); git('commit', '-qm', 'one')
    nid = nbcells.add(p, 'a1', 'code', 'w = 0'); nbcells.sub(p, 'y = 2', 'y = 3')   # edits in place keep the other ids
    assert nbcells.check('HEAD', tmp_path) == 0 and len(nbcells.load(p)['cells']) == 3 and nid
    nbcells.save(p, _nb([('zz', 'x = 1'), ('yy', 'y = 3')]))                        # regenerated: cell a1 lost its id
    assert nbcells.check('HEAD', tmp_path) == 1

def test_last_commit_kept_cell_ids():
    "The repository's own last commit edited its notebooks in place (skips in a shallow clone without HEAD~1)."
    r = subprocess.run(['git', 'rev-parse', '--verify', '-q', 'HEAD~1'], cwd=ROOT, capture_output=True)
    if r.returncode: pytest.skip("no HEAD~1 here (a shallow clone): nothing to compare with")
    assert nbcells.check('HEAD~1', ROOT) == 0
