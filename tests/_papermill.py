"Run one experiment notebook under papermill on the tiny random model (the wiring tests of `nbs/experiments/`)."
import csv, json, os, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT/'tools') not in sys.path: sys.path.insert(0, str(ROOT/'tools'))
import experiment_runs   # tools/experiment_runs.py: the report's page of an executed notebook

def run_experiment(tmp_path, name:str, **params):
    "Execute `nbs/experiments/{name}.ipynb` into `tmp_path`; `(out_dir, metrics.json, table.csv rows)`."
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/f'nbs/experiments/{name}.ipynb'), str(tmp_path/'executed.ipynb'), cwd=str(ROOT),
                        progress_bar=False, parameters=dict(model='tiny', out_dir=str(out), **params))
    check_shown(tmp_path/'executed.ipynb', out)
    return out, json.loads((out/'metrics.json').read_text()), list(csv.DictReader((out/'table.csv').open()))

def check_shown(executed:Path, out:Path, tiny:bool=True) -> int:
    """The report's HTML page of `executed` shows every PNG the notebook wrote into `out`, loads nothing from the
    network, and, for the tiny model, says it is a wiring check (at the top, in table.md); returns its `<img` count."""
    page = experiment_runs.offline_html(executed)   # raises on a script, stylesheet or image from the network
    pngs = [p for p in out.rglob('*.png') if 'adapters' not in p.parts]
    imgs = page.count('<img')
    print(f'{executed.parent.name}: {imgs} <img for {len(pngs)} PNGs')
    assert pngs and imgs >= len(pngs), (imgs, pngs)
    cells = json.loads(executed.read_text())['cells']
    shown = sum(o.get('data', {}).get('image/png') is not None for c in cells for o in c.get('outputs', []))
    assert shown >= len(pngs), (shown, pngs)   # in JupyterLab too, not only on the page
    if tiny:
        top = [o for c in cells[:6] for o in c.get('outputs', []) if 'WIRING CHECK' in str(o.get('data', {}))]
        assert top and (out/'table.md').read_text().startswith('> **WIRING CHECK'), 'no wiring-check mark'
    return imgs

def check_paired(out, metrics:dict, pairs:list[tuple[str, str]], groups:list[str], rates:dict|None=None,
                 measure:str|None=None) -> list[dict]:
    """`paired.csv`'s rows, checked: one per pair and group (then overall), as in metrics.json, counts adding up, in
    table.md."""
    # rates: (arm, group) -> that arm's success rate there, from its own run; each row's a_rate / b_rate must match it
    # measure: the rows of paired.csv's `measure` column with that value, metrics' paired[measure] and
    # paired_reason[measure]
    rows = [r for r in csv.DictReader((out/'paired.csv').open()) if measure is None or r['measure'] == measure]
    got, why = (metrics['paired'], metrics['paired_reason']) if measure is None else (metrics['paired'][measure],
                                                                                      metrics['paired_reason'][measure])
    want = [(a, b, g) for a, b in pairs for g in [*groups, 'overall']]
    assert [(r['method'], r['reference'], r['family']) for r in rows] == want, rows
    assert [(r['method'], r['reference'], r['family']) for r in got] == want and why is None
    for r in rows:
        n, cells = int(r['n']), [int(r[k]) for k in ('both', 'a_only', 'b_only', 'neither')]
        assert n > 0 and sum(cells) == n and abs(float(r['diff']) - (cells[1] - cells[2]) / n) < 1e-4, r
        assert float(r['ci_lo']) <= float(r['diff']) <= float(r['ci_hi']) and 0 <= float(r['p']) <= 1, r
        # each side's rate is that arm's own, per group
        for arm, rate in (('method', 'a_rate'), ('reference', 'b_rate')):
            if (r[arm], r['family']) in (rates or {}):
                assert abs(float(r[rate]) - rates[r[arm], r['family']]) < 1e-4, (r, rates)
    md = (out/'table.md').read_text()
    assert "McNemar's exact p" in md and 'diff [95% CI]' in md
    assert all(f"| {r['method']} | {r['reference']} | {r['family']} | {r['n']} |" in md for r in rows)
    return rows

def refused_experiment(tmp_path, name:str, **params):
    "Execute `nbs/experiments/{name}.ipynb` expecting it to stop on a bad parameter; `(out_dir, papermill's error)`."
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    with pytest.raises(pm.PapermillExecutionError) as e:
        pm.execute_notebook(str(ROOT/f'nbs/experiments/{name}.ipynb'), str(tmp_path/'executed.ipynb'), cwd=str(ROOT),
                            progress_bar=False, parameters=dict(model='tiny', out_dir=str(out), **params))
    return out, e.value
