"""Experiment parameters are checked before anything loads (`cove.params`): each notebook's check cell, on its defaults
and on bad values, and one papermill run that stops in one line and leaves no folder."""
import ast, json, re
from pathlib import Path
import pytest
from cove.params import ParamError
from _papermill import ROOT, refused_experiment

NBS = sorted((ROOT/'nbs'/'experiments').glob('*.ipynb'))

def _cells(nb:Path) -> list[str]:
    return [''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code']

def _params(nb:Path) -> tuple[str, str, list[str]]:
    "The notebook's parameters cell, the cell after it, and the code of the cells after that."
    nbj = json.loads(nb.read_text())
    i = next(i for i, c in enumerate(nbj['cells']) if 'parameters' in c['metadata'].get('tags', []))
    src = [''.join(c['source']) for c in nbj['cells']]
    return src[i], src[i + 1], [s for s, c in zip(src[i + 2:], nbj['cells'][i + 2:]) if c['cell_type'] == 'code']

def _check(nb:Path, **params) -> dict:
    "Run the notebook's parameters cell, then `params` as papermill would inject them, then its check cell."
    pcell, check, _ = _params(nb)
    ns = {}
    exec(pcell, ns)
    ns.update(params)
    exec(check, ns)
    return ns['checked']

@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_every_notebook_checks_every_parameter_first(nb):
    "The cell right after `parameters` checks each parameter by name, before any cell loads a model or makes a folder."
    pcell, check, rest = _params(nb)
    declared = [t.target.id for t in ast.parse(pcell).body if isinstance(t, ast.AnnAssign)]
    call = next(n for n in ast.walk(ast.parse(check)) if isinstance(n, ast.Call)
                and getattr(n.func, 'id', '') == 'check_params')
    assert [k.arg for k in call.keywords] == declared, (nb.name, declared)
    assert not re.search(r'load_policy\(|\.mkdir\(', check)
    checked = _check(nb)   # the smoke defaults pass
    assert set(checked) == set(declared)

CAL = ROOT/'nbs'/'experiments'/'calibration.ipynb'

@pytest.mark.parametrize('param,value,says', [
    ('n', -5, "n=-5: must be a whole number >= 1"),
    ('families', 'nosuch',
     "families='nosuch': unknown task family 'nosuch'; known: ['code', 'formal', 'math', 'multihop', 'tableqa'"),
    ('difficulties', 99, "difficulties=99: level 99 is not one of tableqa's [0, 1, 2, 3]"),
    ('shots', 'abc', "shots='abc': must be whole numbers >= 0, comma-separated (e.g. 0,2)")])
def test_calibration_refuses_in_one_line(param, value, says):
    with pytest.raises(ParamError) as e: _check(CAL, **{param: value})
    assert str(e.value).startswith(says) and '\n' not in str(e.value) and isinstance(e.value, ValueError)
    assert e.value._render_traceback_() == [f'ParamError: {e.value}']

def test_calibration_parses_good_values():
    got = _check(CAL, families='math, code', difficulties='0,2', shots=3, n=4, split='train')
    assert (got['families'], got['difficulties'], got['shots'], got['n'], got['split']) == (['math', 'code'], [0, 2],
                                                                                            [3], 4, 'train')
    assert _check(CAL, difficulties='all')['difficulties'] == 'all' and _check(CAL)['difficulties'] == 'default'

@pytest.mark.parametrize('name,params,says', [
    ('table2_main', dict(methods='base,no_such_method'),
     "methods='base,no_such_method': unknown method 'no_such_method' (known: "),
    ('memrl_epochs', dict(variants='base,no_such_variant'),
     "variants='base,no_such_variant': unknown variant 'no_such_variant' (known: base, "),
    ('trigger_timing', dict(variant='harness_only'),
     "variant='harness_only': must be one of cove, always_both, random_route"),
    ('api_renaming', dict(algo='ppo'), "algo='ppo': must be one of sft, grpo"),
    ('learning_curve', dict(family='tableqa,math'), "family='tableqa,math': must be one task family"),
    ('router_pareto', dict(overrides={'trigger.k': 0}), "overrides={'trigger.k': 0}: trigger.k=0: must be >= 1"),
    ('harness_limits', dict(ks='2,2'), "ks='2,2': value '2' is given twice")])
def test_notebooks_refuse_names_and_ranges(name, params, says):
    with pytest.raises(ParamError, match=re.escape(says)): _check(ROOT/'nbs'/'experiments'/f'{name}.ipynb', **params)

def test_papermill_stops_calibration_in_one_line(tmp_path):
    "`-p n -5`: the cell's error is the one line, nothing loaded, no out_dir left."
    out, e = refused_experiment(tmp_path, 'calibration', n=-5)
    assert (e.ename, e.evalue) == ('ParamError', 'n=-5: must be a whole number >= 1')
    assert e.traceback == ['ParamError: n=-5: must be a whole number >= 1']
    assert not out.exists()
    cells = json.loads((tmp_path/'executed.ipynb').read_text())['cells']
    # stopped before the model
    assert not any('load_policy' in ''.join(c['source']) and c.get('execution_count') for c in cells)
