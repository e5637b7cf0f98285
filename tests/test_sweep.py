"""`make experiments ARGS='--engine ... --seeds ...'` (tools/sweep.py): a grid of papermill cells, its seed aggregation,
its engines."""
import json, shutil, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import report, sweep
from test_report import _nb

# the smallest budgets of tests/test_report.py's tiny-model report
TINY = {'overrides': {'model.max_new_tokens': 8}, 'calibration': {'families': 'math', 'shots': '0', 'n': 1},
        'learning_curve': {'family': 'math', 'steps': '1', 'n_train': 1, 'n_eval': 1}}
# the only columns of these tables that compare_reports leaves out
WALL = {'seconds', 'eval_seconds', 'train_seconds', 'sec_per_step'}

@pytest.fixture(scope='module')
def grids(tmp_path_factory):
    "One 2-notebook x 2-seed tiny-model grid on the local engine (2 workers) and on a local Ray with 2 CPUs."
    try: import ray   # noqa: F401
    except ImportError:
        pytest.fail("ray is not installed in this venv: pip install -c constraints.txt -e '.[dev,cluster]'")
    out = tmp_path_factory.mktemp('sweep')
    common = ['--seeds', '0,1', '--only', 'calibration,learning_curve', '--model', 'tiny', '--out', str(out),
              '--params', json.dumps(TINY), '--no-html-notebooks', '--workers', '2']
    rcs = {e: report.main(['--engine', e, '--run-id', e, *common]) for e in ('local', 'ray')}
    return out, rcs

# 8 papermill runs and a Ray start: ~106 s of one worker, the heaviest test, so `make test-slow` runs it
@pytest.mark.slow
def test_ray_grid_equals_the_local_one_cell_by_cell(grids):
    out, rcs = grids
    assert rcs == {'local': 0, 'ray': 0}
    assert sweep.compare_reports(out/'local', out/'ray') == []
    recs = json.loads((out/'ray'/'report.json').read_text())
    assert [(r['name'], r['seed'], r['status'])
            for r in recs] == [(n, s, 'ok') for n in ('calibration', 'learning_curve') for s in (0, 1)]
    import pandas as pd
    for e in ('local', 'ray'):
        dst = out/e
        for nb, t in (('calibration', 'calibration.csv'), ('learning_curve', 'curve.csv')):
            per = [pd.read_csv(dst/nb/f'seed{s}'/t) for s in (0, 1)]
            left_out = {c for c in per[0].columns if sweep.WALL_CLOCK.search(c)}
            assert left_out <= WALL, left_out          # only wall-clock fields are left out of the comparison
            agg = pd.read_csv(dst/nb/'aggregate'/t)
            assert len(agg) == per[0].size              # one row per table cell
            succ = agg[agg.column == 'success']
            assert (succ.kind == 'rate').all() and (succ.n_seeds == 2).all() and (succ.trials == 2).all()
            assert (succ.interval == 'wilson, pooled over seeds').all()
            md = (dst/'index.md').read_text()
            assert f'({nb}/aggregate/{Path(t).stem}.md)' in md and f'[seed 1]({nb}/seed1/{t})' in md
            assert (dst/nb/'seed0'/f'{nb}.ipynb').exists() and (dst/nb/'seed1'/f'{nb}.ipynb').exists()
        assert ('4 of 4 grid cells succeeded' in (dst/'index.md').read_text()
                and '/2 = ' in (dst/'index.html').read_text())   # pooled k/2

def test_seed_aggregation_and_a_failed_cell(tmp_path):
    """Seed 2 of one notebook fails: it is listed, seeds 0 and 1 are aggregated (Wilson pooled, t, sd, text equal or
    not); a notebook without `seed` runs once."""
    from scipy import stats
    from statsmodels.stats.proportion import proportion_confint
    src = tmp_path/'nbs'; src.mkdir()
    _nb(src/'a_rates.ipynb', "out_dir: 'Optional[str]' = None   # where\nseed: int = 0   # seed",
        "from pathlib import Path\nif seed == 2: raise ValueError('bad seed 2')\n"
        "k = seed + 1\nPath(out_dir, 'table.csv').write_text(f'arm,n,success,score,tag,seconds\\nx,4,\"{k/4:.3f} [0.1, "
        "0.9] (n=4)\",{2*seed},t{seed},{seed/7}\\n')")
    _nb(src/'b_noseed.ipynb', "out_dir: 'Optional[str]' = None   # where",
        "from pathlib import Path\nPath(out_dir, 'table.csv').write_text('arm,n\\nx,3\\n')")
    dst = sweep.sweep(folder=src, seeds=[0, 1, 2], out_root=tmp_path/'out', run_id='r', html_notebooks=False, workers=2)
    recs = {r['dir']: r for r in json.loads((dst/'report.json').read_text())}
    assert set(recs) == {'a_rates/seed0', 'a_rates/seed1', 'a_rates/seed2', 'b_noseed'}
    assert recs['a_rates/seed2']['status'] == 'failed' and 'bad seed 2' in recs['a_rates/seed2']['error']
    assert all(recs[d]['status'] == 'ok' for d in ('a_rates/seed0', 'a_rates/seed1', 'b_noseed'))
    md = (dst/'index.md').read_text()
    assert '**Failed cells**: [a_rates/seed2]' in md and 'bad seed 2' in md and '3 of 4 grid cells succeeded' in md
    assert '**Ran once, no `seed` parameter**: b_noseed' in md and (dst/'b_noseed'/'table.csv').exists()
    assert 'failed seeds left out: 2' in md
    import pandas as pd
    agg = pd.read_csv(dst/'a_rates'/'aggregate'/'table.csv').set_index('column')
    s = agg.loc['success']
    lo, hi = proportion_confint(3, 8, method='wilson')   # 1/4 + 2/4 pooled
    assert (s.kind, s.n_seeds, s.successes, s.trials) == ('rate', 2, 3, 8)
    assert (s['mean'] == pytest.approx(0.375) and s.sd == pytest.approx(pd.Series([0.25, 0.5]).std())
            and (s.lo, s.hi) == pytest.approx((lo, hi)))
    sc = agg.loc['score']
    assert (sc['mean'] == 1 and sc.sd == pytest.approx(2**0.5)
            and (sc.lo, sc.hi) == pytest.approx(stats.t.interval(0.95, 1, loc=1, scale=stats.sem([0, 2]))))
    assert agg.loc['arm'].kind == 'text' and agg.loc['arm'].equal and not agg.loc['tag'].equal
    amd = (dst/'a_rates'/'aggregate'/'table.md').read_text()
    assert '**differs**: t0 / t1' in amd and '**Differs between seeds**: tag' in amd and 'pooled 3/8 = 0.375' in amd
    assert amd in md or amd.strip() in md                  # shown inline in the index

def test_engine_errors_are_one_line(tmp_path, monkeypatch):
    "No SLURM here, a missing ray or submitit, --seeds with -p seed: each a one-line SystemExit saying what to do."
    base = ['--seeds', '0', '--only', 'calibration', '--out', str(tmp_path)]
    if not shutil.which('sbatch'):
        with pytest.raises(SystemExit) as e: report.main(['--engine', 'slurm', *base])
        assert 'no SLURM on this machine' in str(e.value) and '\n' not in str(e.value)
    for mod, engine in (('ray', 'ray'), ('submitit', 'slurm')):
        monkeypatch.setitem(sys.modules, mod, None)   # import fails as if not installed
        with pytest.raises(SystemExit) as e: report.main(['--engine', engine, *base])
        assert (f"--engine {engine} needs {mod}" in str(e.value) and "pip install 'cove[cluster]'" in str(e.value)
                and '\n' not in str(e.value))
    with pytest.raises(SystemExit) as e: report.main(['-p', 'seed', '3', *base])
    assert 'both --seeds and -p seed' in str(e.value)
    with pytest.raises(SystemExit, match='comma-separated integers'): report.main([*base, '--seeds', '0,x'])
    assert not list(tmp_path.glob('*/calibration/*/*.ipynb'))   # nothing ran
