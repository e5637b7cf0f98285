"""`make experiments` (tools/report.py): the report of the experiment notebooks, and papermill's view of their
parameters cells."""
import json, re, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import report

def _nb(path, *cells):
    "A notebook of code cells; the first is tagged parameters."
    import nbformat
    nb = nbformat.v4.new_notebook(metadata={'kernelspec': {'name': 'python3', 'display_name': 'Python 3',
                                                           'language': 'python'},
                                            'language_info': {'name': 'python'}})
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.cells[0].metadata['tags'] = ['parameters']
    nbformat.write(nb, str(path))
    return path

def test_every_experiment_notebook_parameter_parses():
    """`papermill --help-notebook` lists every parameter of every notebook in nbs/experiments/, with its type and help
    comment."""
    nbs = report.notebooks()
    assert len(nbs) >= 5
    bad = {p.name: report.param_problems(p) for p in nbs}
    assert not any(bad.values()), {k: v for k, v in bad.items() if v}
    for p in nbs:
        params = report.inspect_params(p)[0]
        assert {'model', 'out_dir', 'plugins'} <= {x.name for x in params}, p.name   # what `make experiments` passes
        assert next(x for x in params if x.name == 'out_dir').default == 'None', p.name

def test_param_problems_finds_what_papermill_drops(tmp_path):
    "The check itself: a second '=', a `|` annotation, no type, no help comment are each reported."
    nb = _nb(tmp_path/'x.ipynb',
             "a: int = 1   # at least, as in x >= 1\nb: 'str | None' = None   # pipe\nc = 3   # untyped\n"
                                 "d: int = 4\ne: 'Optional[str]' = None   # fine")
    probs = report.param_problems(nb)
    assert any('Unable to parse line 1' in p for p in probs) and any(p.startswith('a:') for p in probs)
    assert any(p.startswith('b: papermill does not see it') for p in probs)
    assert 'c: no type (write `c: TYPE = ...`)' in probs and any(p.startswith('d: no help') for p in probs)
    assert not any(p.startswith('e') for p in probs) and len(probs) == 5

def test_makefile_targets_every_notebook():
    """`make experiment-<name-with-dashes>` runs nbs/experiments/<name>.ipynb; the old name `experiment-table2` still
    works (docs/experiments.md)."""
    def dry(t, *a): return subprocess.run(['make', '-n', t, *a], cwd=ROOT, capture_output=True, text=True)
    for p in report.notebooks():
        r = dry('experiment-' + p.stem.replace('_', '-'), 'ARGS=-p seed 3')
        assert (r.returncode == 0 and f'run=outputs/{p.stem}/' in r.stdout
                and f'papermill nbs/experiments/{p.name} $run/{p.name} -p out_dir $run' in r.stdout
                and '-p seed 3' in r.stdout), r.stdout + r.stderr
    assert 'nbs/experiments/table2_main.ipynb' in dry('experiment-table2').stdout
    assert 'tools/report.py --model tiny' in dry('experiments', 'ARGS=--model tiny').stdout
    assert dry('experiment-no-such-notebook').returncode != 0

def test_plugin_option_is_the_plugins_parameter():
    "`--plugin` (repeatable, comma lists) is every notebook's `plugins` parameter (tests/test_plugins.py runs one)."
    glob, per = report.split_params([('families', 'units')], None, 'tiny', {'table2_main'}, ['units_plugin', 'a, b'])
    assert (glob, per) == ({'families': 'units', 'model': 'tiny', 'plugins': 'units_plugin,a,b'}, {})
    assert 'plugins' not in report.split_params(None, None, None, set(), [])[0]

def test_report_on_tiny_model(tmp_path):
    """calibration and learning_curve with the tiny model at their smallest budgets: index.md/html link every table and
    figure with n and runtime."""
    params = {'overrides': {'model.max_new_tokens': 8}, 'calibration': {'families': 'math', 'shots': '0', 'n': 1},
              'learning_curve': {'family': 'math', 'steps': '1', 'n_train': 1, 'n_eval': 1}}
    rc = report.main(['--model', 'tiny', '--only', 'calibration,learning_curve', '--out', str(tmp_path), '--run-id',
                      'r', '--params', json.dumps(params)])
    dst = tmp_path/'r'
    recs = {r['name']: r for r in json.loads((dst/'report.json').read_text())}
    assert (rc == 0 and list(recs) == ['calibration', 'learning_curve']
            and all(r['status'] == 'ok' for r in recs.values())), recs
    assert recs['calibration']['params'] == {'overrides': {'model.max_new_tokens': 8}, 'model': 'tiny',
                                             'families': 'math', 'shots': '0', 'n': 1}
    assert (recs['calibration']['n'] == {'calibration.csv': ['1']}
            and recs['learning_curve']['n'] == {'curve.csv': ['1']})
    md, page = (dst/'index.md').read_text(), (dst/'index.html').read_text()
    for name, fig in (('calibration', 'calibration.png'), ('learning_curve', 'curve.png')):
        r = recs[name]
        assert ((dst/name/f'{name}.ipynb').exists() and (dst/name/f'{name}.html').exists()
                and (dst/name/'metrics.json').exists())
        assert fig in r['artifacts']['figures'] and 'table.md' in r['artifacts']['tables'] and 0 < r['seconds'] < 120
        row = next(l for l in md.splitlines() if l.startswith(f'| [{name}]'))
        assert (f'| ok (**wiring check**: tiny model) | {r["seconds"]:.1f} | 1 |' in row and f']({name}/{fig})' in row
                and f']({name}/table.md)' in row)
        assert f'href="{name}/{fig}"' in page and f'src="{name}/{fig}"' in page and f'id="{name}"' in page
        assert '(**wiring check**: tiny model)' in row and f'**{report.WIRING}**' in md   # not a result
        # the executed notebook: its figures inline, nothing from a CDN
        nb_page = (dst/name/f'{name}.html').read_text()
        assert nb_page.count('<img') >= len(r['artifacts']['figures']) > 0 and 'WIRING CHECK' in nb_page
        assert (not report.NETWORK.search(nb_page) and '<script src=' not in nb_page
                and '<link href="http' not in nb_page)
    links = re.findall(r'\]\(([^)#]+)\)', md)
    assert len(links) >= 10 and all((dst/l).exists() for l in links), [l for l in links if not (dst/l).exists()]
    # the summary and each notebook's own table, rates with their n
    assert page.count('<table>') >= 3 and '(n=1)' in page
    assert (tmp_path/'latest').resolve() == dst.resolve()
    from cove.experiment import WIRING_NOTE
    assert report.WIRING == WIRING_NOTE   # tools/ imports no cove: the same words, kept in step here

def test_failed_notebook_is_listed_and_the_rest_still_run(tmp_path):
    src = tmp_path/'nbs'; src.mkdir()
    _nb(src/'a_broken.ipynb', "out_dir: 'Optional[str]' = None   # where",
        "raise ValueError('boom at the second cell')")
    _nb(src/'b_fine.ipynb', "out_dir: 'Optional[str]' = None   # where\nk: int = 1   # successes",
        "from pathlib import Path\nPath(out_dir, 'table.csv').write_text(f'arm,n,success\\nx,3,{k}\\n')\n"
        "Path(out_dir, 'table.md').write_text('| arm | n |\\n|---|---|\\n| x | 3 |\\n')")
    dst = report.report(folder=src, out_root=tmp_path/'out', run_id='r', glob_params={'k': 2, 'model': 'tiny'},
                        html_notebooks=False)
    recs = {r['name']: r for r in json.loads((dst/'report.json').read_text())}
    assert (recs['a_broken']['status'] == 'failed'
            and recs['a_broken']['error'].startswith('ValueError: boom at the second cell'))
    assert (recs['b_fine']['status'] == 'ok' and recs['b_fine']['params'] == {'k': 2}
            and recs['b_fine']['n'] == {'table.csv': ['3']})
    assert (dst/'b_fine'/'table.csv').read_text().endswith('x,3,2\n')     # the parameter reached the notebook
    md = (dst/'index.md').read_text()
    assert ('| [a_broken](#a_broken) | **failed** |' in md and 'ValueError: boom at the second cell' in md
            and '| [b_fine](#b_fine) | ok |' in md)
    assert (dst/'a_broken'/'a_broken.ipynb').exists() and 'boom' in (dst/'index.html').read_text()
    with pytest.raises(SystemExit): report.report(['no_such'], folder=src, out_root=tmp_path/'out')

def test_a_kernel_that_dies_in_start_up_is_started_again(tmp_path, monkeypatch, capsys):
    """Two cells' kernels started at once can pick the same port; the loser dies before any cell runs. Its notebook is
    run again (counted in `kernel_starts`, said on stderr); a kernel that keeps dying, or dies after a cell ran, fails."""
    import papermill as pm
    import experiment_runs as runs
    nb = _nb(tmp_path/'a.ipynb', "out_dir: 'Optional[str]' = None   # where",
             "from pathlib import Path\nPath(out_dir, 'x.txt').write_text('ran')")
    real, deaths = pm.execute_notebook, []
    def dies_first(*a, **k):
        if len(deaths) < 1:
            deaths.append(1)
            raise RuntimeError('Kernel died before replying to kernel_info')
        return real(*a, **k)
    monkeypatch.setattr(pm, 'execute_notebook', dies_first)
    r = runs.run_notebook(nb, tmp_path/'out', {})
    assert r['status'] == 'ok' and r['kernel_starts'] == 2 and (tmp_path/'out'/'x.txt').read_text() == 'ran'
    assert 'the kernel died before running a cell' in capsys.readouterr().err
    def always_dies(*a, **k): raise RuntimeError('Kernel died before replying to kernel_info')
    monkeypatch.setattr(pm, 'execute_notebook', always_dies)
    r = runs.run_notebook(nb, tmp_path/'out2', {})
    assert r['status'] == 'failed' and 'kernel_info' in r['error'] and r['kernel_starts'] == runs.KERNEL_STARTS
