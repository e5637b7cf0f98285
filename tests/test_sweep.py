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

def _episodes(d:Path, outcomes:list[int], fams=('math', 'tableqa')):
    "A run folder `d` whose episodes.jsonl holds `outcomes` (0/1), alternating `fams`, the same tasks in every run."
    d.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(dict(episode=i, family_spec=fams[i % len(fams)], split='test', task_id=f't{i}',
                             status='success' if x else 'failure')) for i, x in enumerate(outcomes)]
    (d/'episodes.jsonl').write_text('\n'.join(lines) + '\n')

def _pooled_case(tmp_path) -> tuple[Path, list[dict]]:
    """Two seed folders of one notebook, each with base/ and cove/ run folders and the paired.csv the notebooks write
    from them (`paired_or_reason` of `comparison_pairs`): the report's records of those two cells."""
    import pandas as pd
    from cove.experiment import comparison_pairs
    from cove.stats import paired_or_reason
    dst = tmp_path/'r'
    seeds = {0: ([1, 1, 0, 0, 1], [0, 1, 0, 1, 0]), 1: ([1, 0, 1, 1], [0, 0, 1, 0])}   # seed -> (cove, base)
    recs = []
    for s, (a, b) in seeds.items():
        out = dst/'nb'/f'seed{s}'
        _episodes(out/'cove', a)
        _episodes(out/'base', b)
        rows, why = paired_or_reason({m: out/m for m in ('base', 'cove')}, comparison_pairs(['base', 'cove']),
                                     ['math', 'tableqa'])
        assert why is None
        pd.DataFrame(rows).round(4).to_csv(out/'paired.csv', index=False)
        recs.append(dict(name='nb', seed=s, dir=f'nb/seed{s}', status='ok', params={'seed': s}, seconds=1.0,
                         artifacts=dict(tables=['paired.csv'], figures=[], metrics=[]), n={}, executed='nb.ipynb'))
    return dst, recs

def test_paired_comparisons_pooled_over_seeds(tmp_path):
    """paired_pooled.csv/.md: each comparison of the seeds' paired.csv, its per-task pairs pooled over the seeds by
    `cove.stats.pooled_paired` (the 2x2 tables summed), each seed's row beside it; a known answer by hand."""
    import pandas as pd
    from cove.stats import paired, paired_counts, pooled_paired
    dst, recs = _pooled_case(tmp_path)
    aggs = sweep.aggregate_all(dst, recs)
    assert aggs['nb']['paired_pooled']['pooled'] == 3 and aggs['nb']['paired_pooled']['not_pooled'] == 0
    t = pd.read_csv(dst/'nb'/'aggregate'/'paired_pooled.csv', dtype={'seed': str})
    pooled = t[(t.family == 'overall') & (t.seed == 'pooled')].iloc[0]
    # by hand: seed 0 has both 1, cove only 2, base only 1, neither 1; seed 1 both 1, cove only 2, neither 1
    want = paired_counts(2, 4, 1, 2)
    assert (pooled.method, pooled.reference, pooled.n, pooled.both, pooled.a_only, pooled.b_only) == ('cove', 'base',
                                                                                                    9, 2, 4, 1)
    assert pooled['diff'] == pytest.approx(3 / 9) and pooled.p == pytest.approx(want.p)
    assert (pooled.ci_lo, pooled.ci_hi, pooled.mde) == pytest.approx((*want.ci, want.mde))
    ref = pooled_paired({0: ([1, 1, 0, 0, 1], [0, 1, 0, 1, 0]), 1: ([1, 0, 1, 1], [0, 0, 1, 0])})
    assert pooled.seed_sd == pytest.approx(ref['seed_sd']) and pooled.seeds == '0 1'
    per = t[(t.family == 'overall') & (t.seed == '1')].iloc[0]
    assert (per.n, per['diff']) == (4, pytest.approx(paired([1, 0, 1, 1], [0, 0, 1, 0]).diff))
    math = t[(t.family == 'math') & (t.seed == 'pooled')].iloc[0]   # seed 0 tasks 0,2,4; seed 1 tasks 0,2
    assert (math.n, math.a_only, math.b_only, math.both, math.neither) == (5, 3, 0, 1, 1)
    md = (dst/'nb'/'aggregate'/'paired_pooled.md').read_text()
    assert '| cove | base | overall | +0.333 [' in md and 'n=5' in md and 'n=4' in md and 'pooled_paired' in md
    sweep.write(dst, recs, 'r', 'cmd', dict(engine='local', seeds=[0, 1], unseeded=[], cells=2), aggs)
    assert '(nb/aggregate/paired_pooled.md)' in (dst/'index.md').read_text()
    # the per-episode outcomes gone from one seed: said in one line, nothing pooled
    (dst/'nb'/'seed1'/'cove'/'episodes.jsonl').unlink()
    aggs = sweep.aggregate_all(dst, recs)
    lines = (dst/'nb'/'aggregate'/'paired_pooled.md').read_text().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('No pooled paired comparison: seed1: no episodes.jsonl for')
    assert aggs['nb']['paired_pooled']['pooled'] == 0 and aggs['nb']['paired_pooled']['not_pooled'] == 3

RESUMABLE = ("import os, signal\nfrom pathlib import Path\n"
             "with open(log, 'a') as f: f.write(f'{seed}\\n')\n"
             "first = Path(log).read_text().split().count(str(seed)) == 1\n"
             "Path(out_dir, 'table.csv').write_text(f'arm,n,score\\nx,4,{seed}\\n')\n"
             "if seed == 1 and first:   # the cell's process killed (-9) mid-run, and this kernel with it\n"
             "    os.kill(os.getppid(), signal.SIGKILL)\n    os._exit(1)")

def test_a_killed_grid_resumes(tmp_path):
    """`--resume` into the same run folder: the cell finished ok is not run again (its log line, its files), the killed
    one (no cell.json) runs again, as would a failed one (its cell.json not ok); then both are ok and aggregated."""
    src = tmp_path/'nbs'
    src.mkdir()
    _nb(src/'a.ipynb', "out_dir: 'Optional[str]' = None   # where\nseed: int = 0   # seed\nlog: str = ''   # runs",
        RESUMABLE)
    log = tmp_path/'runs.log'
    kw = dict(folder=src, seeds=[0, 1], out_root=tmp_path/'out', run_id='cpu', html_notebooks=False, workers=2,
              glob_params={'log': str(log)})
    dst = sweep.sweep(**kw)
    recs = {r['dir']: r for r in json.loads((dst/'report.json').read_text())}
    assert [recs[f'a/seed{s}']['status'] for s in (0, 1)] == ['ok', 'failed']
    assert 'exited with -9' in recs['a/seed1']['error'] and not (dst/'a'/'seed1'/'cell.json').exists()
    done0 = {f.name: f.stat().st_mtime_ns for f in (dst/'a'/'seed0').iterdir()}
    dst = sweep.sweep(**kw, resume=True)
    assert sorted(log.read_text().split()) == ['0', '1', '1']   # seed 0 ran once
    assert {f.name: f.stat().st_mtime_ns for f in (dst/'a'/'seed0').iterdir()} == done0
    recs = {r['dir']: r for r in json.loads((dst/'report.json').read_text())}
    assert all(r['status'] == 'ok' for r in recs.values()) and len(recs) == 2
    assert recs['a/seed0'].get('resumed') and not recs['a/seed1'].get('resumed')
    md = (dst/'index.md').read_text()
    assert '2 of 2 grid cells succeeded' in md and '| ok (an earlier run: --resume) |' in md
    assert all(r.get('commit') for r in recs.values()) and '| commit |' in md   # the code each cell ran
    assert (dst/'a'/'aggregate'/'table.csv').exists()
    sweep.sweep(**kw, resume=True)   # all done: nothing runs
    assert len(log.read_text().split()) == 3
    cell = dict(out=str(dst/'a'/'seed0'), seed=0, params={'log': str(log), 'seed': 0})
    assert sweep.finished(cell) and not sweep.finished(dict(cell, params={'log': 'other', 'seed': 0}))
    rec = json.loads((dst/'a'/'seed0'/'cell.json').read_text())
    (dst/'a'/'seed0'/'cell.json').write_text(json.dumps(dict(rec, status='failed')))
    assert not sweep.finished(cell)   # a failed cell runs again
    (dst/'a'/'seed0'/'cell.json').write_text('{"status": "ok", "se')   # torn: runs again
    assert not sweep.finished(cell)

def test_a_grid_worker_keeps_to_its_thread_share():
    """A worker given one thread (OMP_NUM_THREADS) loads its policy with one torch thread, not all the cores: two workers
    at two threads each on two cores made every episode about ten times slower."""
    from cove.llm import torch_threads
    assert torch_threads(env=sweep._child_env(1)) == 1
    assert torch_threads(env=dict(sweep._child_env(1), PYTEST_XDIST_WORKER_COUNT='1')) == 1

STOPPABLE = ("import os, time\nfrom pathlib import Path\n"
             "Path(out_dir, 'pid').write_text(str(os.getpid()))\n"
             "time.sleep(600)")

DRIVER = """import signal, sys
sys.path.insert(0, {tools!r})
import sweep
signal.signal(signal.SIGTERM, signal.default_int_handler)   # as tools/report.py does: `kill PID` stops the grid
try: sweep.sweep(folder={src!r}, seeds=[0, 1], out_root={out!r}, run_id='g', html_notebooks=False, workers=2)
except KeyboardInterrupt: sys.exit(130)
"""

def test_a_stopped_grid_stops_its_cells(tmp_path):
    """SIGTERM to the grid's own process (not its group) stops each running cell: its notebook's kernel ends, its
    `cell.json` says interrupted and the index lists it. Before, the grid waited on cells that went on running."""
    import os, signal, subprocess, time
    src = tmp_path/'nbs'
    src.mkdir()
    _nb(src/'a.ipynb', "out_dir: 'Optional[str]' = None   # where\nseed: int = 0   # seed", STOPPABLE)
    code = DRIVER.format(tools=str(Path(sweep.__file__).parent), src=str(src), out=str(tmp_path/'out'))
    p = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = [tmp_path/'out'/'g'/'a'/f'seed{s}'/'pid' for s in (0, 1)]
    deadline = time.time() + 240
    while not all(f.exists() for f in pids) and time.time() < deadline and p.poll() is None: time.sleep(0.5)
    assert all(f.exists() for f in pids), p.communicate(timeout=60)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 130, err[-2000:]
    kernels = [int(f.read_text()) for f in pids]
    time.sleep(1)
    alive = []
    for k in kernels:
        try: os.kill(k, 0); alive.append(k)
        except ProcessLookupError: pass
    assert alive == [], f'kernels left running: {alive}'
    recs = json.loads((tmp_path/'out'/'g'/'report.json').read_text())
    assert sorted(r['status'] for r in recs) == ['interrupted', 'interrupted']
