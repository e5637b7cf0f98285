#!/usr/bin/env python3
"""A grid of papermill runs (notebooks × parameters × seeds) on an engine, and the seed aggregation of its tables.

tools/report.py calls this when it is given `--seeds`, `--engine` or `--workers`; without them it runs the notebooks one
after another as before. Each grid cell is one papermill run in a child process (`tools/sweep.py --cell JSON`) writing
into its own folder of the report, `<notebook>/seed<k>/` (`<notebook>/` for a notebook without a `seed` parameter,
which runs once and is listed). Engines:

  local   a pool of `--workers` child processes (default: the cores), `OMP_NUM_THREADS` = cores // workers in each
  ray     one Ray task per cell, `num_cpus`/`num_gpus` each, on `ray.init(address)` or a local `ray.init(num_cpus=...)`
  slurm   one SLURM job per cell through submitit's AutoExecutor (folder `<report>/slurm/`)

ray and slurm need `pip install 'cove[cluster]'`; on a cluster the report folder and the repository must sit at the
same path on every node (a shared file system). A failed cell is listed with its error and the others go on.

For each notebook run at two or more seeds, every CSV table of its seed folders is aligned cell by cell (same rows and
columns in every seed) into `<notebook>/aggregate/<table>.md` (readable) and `<table>.csv` (one row per table cell):
the mean over seeds, the between-seed standard deviation (ddof=1), the number of seeds, and a pooled 95% interval. A
rate cell `0.500 [0.150, 0.850] (n=4)` pools its successes and trials over seeds (Wilson interval, statsmodels); any
other number gets a t interval over the seeds (scipy). A text cell must be the same in every seed, else it is marked
as differing. Where the seeds wrote `paired.csv` (paired comparisons of runs on the same tasks), each comparison's
per-task outcomes are read back from the run folders it came from and pooled over the seeds, stratified by seed
(`cove.stats.pooled_paired`), into `<notebook>/aggregate/paired_pooled.md` and `.csv`, each seed's row beside the
pooled one; where the episodes are not there, that file says so in one line. The figures that are not paired
comparisons (a rate on two splits, a forgetting rate, attention mass per input) go into `<notebook>/aggregate/pooled.md`
by tools/pooled.py, for the notebooks it knows.

`--resume` (`sweep(resume=True)`, `make experiments-cpu`): a cell whose folder holds the `cell.json` of an ok run with
the same parameters (written last, whole, by `run_cell`) is not run again; a killed or failed cell is.
"""
import json, math, os, re, shutil, subprocess, sys, time
from concurrent.futures import CancelledError, ThreadPoolExecutor, TimeoutError, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT/'tools') not in sys.path: sys.path.insert(0, str(ROOT/'tools'))
import experiment_runs as runs   # what tools/report.py uses too; that script is not imported here

ENGINES = ('local', 'ray', 'slurm')
CLUSTER_HINT = "pip install 'cove[cluster]'"
# columns that hold wall-clock time: they differ between two runs of the same cell, so compare_reports leaves them out
WALL_CLOCK = re.compile(r'(?:^|[ _])(?:seconds|secs|sec_per_step|runtime|wall|time)(?:$|[ _])', re.I)

def cores() -> int:
    try: return len(os.sched_getaffinity(0))
    except AttributeError: return os.cpu_count() or 1

# --- the grid ----------------------------------------------------------------------------------------------------------

def grid(nbs:list[Path], glob_params:dict|None, per_params:dict|None, seeds:list[int]|None, dst:Path) -> tuple[list[dict], list[str]]:
    "The cells: one per notebook and seed (`seeds` None: one per notebook); and the notebooks without a `seed` parameter."
    cells, unseeded = [], []
    for p in nbs:
        decl = runs.declared_params(p)
        params = {k: v for k, v in (glob_params or {}).items() if k in decl} | (per_params or {}).get(p.stem, {})
        if seeds is not None and 'seed' in params:
            raise SystemExit(f'{p.stem}: both --seeds and -p seed {params["seed"]} given; use one')
        if seeds is None or 'seed' not in decl:
            if seeds is not None: unseeded.append(p.stem)
            cells.append(dict(name=p.stem, seed=None, dir=p.stem, path=str(p), params=params))
        else:
            cells += [dict(name=p.stem, seed=s, dir=f'{p.stem}/seed{s}', path=str(p), params=dict(params, seed=s)) for s in seeds]
    return cells, unseeded

def run_cell(cell:dict, timeout=None, html_notebooks=True) -> dict:
    "One cell in this process (the child of every engine): papermill into `cell['out']`, then what it left; the record."
    path, out = Path(cell['path']), Path(cell['out'])
    commit = runs.git_commit()   # the code this cell runs, as it starts (the index is written later, at another HEAD)
    try: r = runs.run_notebook(path, out, cell['params'], timeout)
    except runs.Interrupted as e: r = e.rec
    r.update(name=cell['name'], seed=cell['seed'], dir=cell['dir'], n=runs.sample_sizes(out), artifacts=runs.artifacts(out),
             host=os.uname().nodename, threads=os.environ.get('OMP_NUM_THREADS'), commit=commit)
    if html_notebooks and r['status'] == 'ok' and (out/r['executed']).exists(): r['html'] = runs.notebook_html(out/r['executed'])
    tmp = out/'cell.json.tmp'   # written whole, then renamed: a kill leaves the old record or the new, never half
    tmp.write_text(json.dumps(r, indent=1, default=str) + '\n')
    os.replace(tmp, out/'cell.json')
    return r

def finished(cell:dict) -> dict | None:
    """The record of `cell` from an earlier run into the same folder (`--resume`), where that run finished it ok with
    the same parameters: its `cell.json`, which `run_cell` writes last. None: the cell is to run."""
    try: r = json.loads((Path(cell['out'])/'cell.json').read_text())
    except (OSError, ValueError): return None
    if not isinstance(r, dict) or r.get('status') != 'ok' or r.get('seed') != cell['seed']: return None
    if r.get('params') != json.loads(json.dumps(cell['params'], default=str)): return None
    return dict(r, resumed=True)

def _child_env(threads:int) -> dict:
    t = str(max(1, int(threads)))
    return {'OMP_NUM_THREADS': t, 'MKL_NUM_THREADS': t, 'OPENBLAS_NUM_THREADS': t, 'HF_HUB_OFFLINE': os.environ.get('HF_HUB_OFFLINE', '1'),
            'TRANSFORMERS_OFFLINE': os.environ.get('TRANSFORMERS_OFFLINE', '1'), 'TOKENIZERS_PARALLELISM': 'false'}

def _cell_runner():
    """A function running one cell as `python tools/sweep.py --cell JSON` in a child process, and returning its record.
    Defined inside a function and self-contained, so that Ray and submitit pickle it by value (tools/ is no package a
    worker could import)."""
    def run(cell, env, python=None, procs=None):
        import json, os, subprocess, sys, time
        t0 = time.time()
        p = subprocess.Popen([python or sys.executable, cell['sweep'], '--cell', json.dumps(cell)], cwd=cell['root'],
                             env=dict(os.environ, **env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if procs is not None: procs.append(p)   # the local engine stops its children on Ctrl-C
        out, err = p.communicate()
        lines = [l for l in out.splitlines() if l.startswith('{"status"') or l.startswith('{"name"')]
        if p.returncode == 0 and lines: return json.loads(lines[-1])
        err = (err or out).strip().splitlines()[-20:]
        return dict(name=cell['name'], seed=cell['seed'], dir=cell['dir'], params=cell['params'], status='failed',
                    error=f'the cell process exited with {p.returncode}: ' + '\n'.join(err), seconds=round(time.time() - t0, 1),
                    n={}, artifacts=dict(tables=[], figures=[], metrics=[]), executed=os.path.basename(cell['path']))
    return run

def stop_children(procs:list, grace:float=60) -> None:
    "SIGTERM each running cell process (its notebook is stopped and its `cell.json` says so), SIGKILL after `grace` s."
    for p in procs:
        if p.poll() is None: p.terminate()
    end = time.time() + grace
    for p in procs:
        try: p.wait(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired: p.kill()

def _need(module:str, engine:str):
    try: return __import__(module)
    except ImportError: raise SystemExit(f"--engine {engine} needs {module}, which is not installed: {CLUSTER_HINT}") from None

def check_engine(engine:str):
    "A one-line SystemExit when `engine` cannot run here (a missing package, no SLURM)."
    if engine not in ENGINES: raise SystemExit(f'--engine {engine}: one of {", ".join(ENGINES)}')
    if engine == 'ray': _need('ray', engine)
    if engine == 'slurm':
        _need('submitit', engine)
        if not shutil.which('sbatch'):
            raise SystemExit('--engine slurm: no SLURM on this machine (sbatch is not on PATH); run it on a SLURM login node, or use --engine local or ray')

def execute(cells:list[dict], engine='local', dst:Path=None, workers=None, ray_address=None, num_cpus=1, num_gpus=0,
            slurm=None, on_done=None):
    "Run every cell on `engine`; `on_done(record)` after each, in the order they finish."
    run, n = _cell_runner(), len(cells)
    if engine == 'local':
        workers = max(1, min(workers or cores(), n))
        env = _child_env(max(1, cores() // workers))
        print(f'grid: {n} cells on {workers} local workers, {env["OMP_NUM_THREADS"]} thread(s) each', flush=True)
        procs, ex = [], ThreadPoolExecutor(workers)   # each worker drives one child process: a pool of processes
        futs, reported = [], set()
        try:
            futs = [ex.submit(run, c, env, None, procs) for c in cells]
            for f in as_completed(futs):
                reported.add(f)
                on_done(f.result())
        except KeyboardInterrupt:   # Ctrl-C or SIGTERM: no new cell; each running one stops and writes its record
            for f in futs: f.cancel()
            stop_children(procs)
            for f in futs:
                if f in reported or f.cancelled(): continue
                try: on_done(f.result(timeout=60))
                except (TimeoutError, CancelledError): pass   # a cell that did not end: the index lacks it
            stop_children(procs)   # one a worker started meanwhile
            ex.shutdown(wait=False)
            raise
        ex.shutdown()
    elif engine == 'ray':
        ray = _need('ray', engine)
        started = not ray.is_initialized()
        if started:
            if ray_address: ray.init(address=ray_address, log_to_driver=False)
            else: ray.init(num_cpus=workers or cores(), include_dashboard=False, log_to_driver=False)
        env = _child_env(max(1, math.floor(num_cpus)))
        task = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=0)(run)
        print(f'grid: {n} cells as Ray tasks ({num_cpus} CPU, {num_gpus} GPU each) on {ray_address or "a local Ray"}: '
              f'{ray.cluster_resources()}', flush=True)
        try:
            pending = {task.remote(c, env, sys.executable if not ray_address else None): c for c in cells}
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    c = pending.pop(ref)
                    try: r = ray.get(ref)
                    except Exception as e:   # the task itself died (a lost node, a worker killed)
                        r = dict(name=c['name'], seed=c['seed'], dir=c['dir'], params=c['params'], status='failed', seconds=0.0,
                                 error=f'Ray task failed: {type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ""}',
                                 n={}, artifacts=dict(tables=[], figures=[], metrics=[]), executed=Path(c['path']).name)
                    on_done(r)
        finally:
            if started: ray.shutdown()
    elif engine == 'slurm':
        check_engine('slurm')
        import submitit
        s = dict(slurm or {})
        ex = submitit.AutoExecutor(folder=str(dst/'slurm'), cluster='slurm')
        ex.update_parameters(timeout_min=int(s.get('time') or 60), cpus_per_task=max(1, math.ceil(num_cpus)),
                             **({'gpus_per_node': int(num_gpus)} if num_gpus else {}),
                             **({'slurm_partition': s['partition']} if s.get('partition') else {}))
        env = _child_env(max(1, math.ceil(num_cpus)))
        jobs = [(ex.submit(run, c, env), c) for c in cells]
        print(f'grid: {n} cells as SLURM jobs {", ".join(j.job_id for j, _ in jobs)} (logs in {dst/"slurm"})', flush=True)
        for j, c in jobs:
            try: r = j.result()
            except Exception as e:
                r = dict(name=c['name'], seed=c['seed'], dir=c['dir'], params=c['params'], status='failed', seconds=0.0,
                         error=f'SLURM job {j.job_id} failed: {type(e).__name__}: {str(e).strip()[-500:]}',
                         n={}, artifacts=dict(tables=[], figures=[], metrics=[]), executed=Path(c['path']).name)
            on_done(r)
    else: check_engine(engine)

def sweep(names=None, glob_params=None, per_params=None, seeds=None, engine='local', out_root=ROOT/'outputs'/'report', run_id=None,
          timeout=None, folder=runs.NBS, command='tools/report.py', html_notebooks=True, workers=None, ray_address=None,
          num_cpus=1, num_gpus=0, slurm=None, resume=False) -> Path:
    """The grid of `names` (all of `folder`) × `seeds` on `engine` into `<out_root>/<run_id>/`, aggregated and indexed;
    returns that folder. `resume`: a cell an earlier run into the same folder finished ok with the same parameters
    (`finished`) is not run again; its record is listed as it was."""
    check_engine(engine)
    nbs = runs.notebooks(folder)
    if names:
        have = {p.stem: p for p in nbs}
        missing = [n for n in names if n not in have]
        if missing: raise SystemExit(f'no experiment notebook {", ".join(missing)} (have {", ".join(have)})')
        nbs = [have[n] for n in names]
    run_id = run_id or time.strftime('%Y%m%d-%H%M%S')
    dst = Path(out_root)/run_id; dst.mkdir(parents=True, exist_ok=True)
    cells, unseeded = grid(nbs, glob_params, per_params, seeds, dst)
    for u in unseeded:
        print(f'WARNING: {u} has no `seed` parameter: it runs once, not once per seed ({",".join(map(str, seeds))})', file=sys.stderr, flush=True)
    for c in cells: c.update(out=str(dst/c['dir']), root=str(ROOT), sweep=str(Path(__file__).resolve()), timeout=timeout, html=html_notebooks)
    order = {(c['name'], c['seed']): i for i, c in enumerate(cells)}
    recs, meta = [], dict(engine=engine, seeds=seeds, unseeded=unseeded, cells=len(cells))
    def done(r):
        recs.append(r); recs.sort(key=lambda x: order.get((x['name'], x.get('seed')), 1e9))
        st = r['status'] + (f' ({r["error"].splitlines()[0] if r.get("error") else ""})' if r['status'] != 'ok' else '')
        if r.get('kernel_starts'): st += f' (its kernel died in start-up: started {r["kernel_starts"]} times)'
        print(f'{r["dir"]}: {st} in {r.get("seconds", 0)} s', flush=True)
        write(dst, recs, run_id, command, meta, aggregates={})
    earlier = {c['dir']: r for c in cells if resume and (r := finished(c))}
    todo = [c for c in cells if c['dir'] not in earlier]
    for c in cells:
        if c['dir'] in earlier: print(f'{c["dir"]}: ok in an earlier run, not run again (--resume)', flush=True)
        else: print(f'{c["dir"]}: queued {json.dumps(c["params"])}', flush=True)
    recs += sorted(earlier.values(), key=lambda x: order.get((x['name'], x.get('seed')), 1e9))
    if earlier: write(dst, recs, run_id, command, meta, aggregates={})
    try:
        if todo: execute(todo, engine, dst, workers, ray_address, num_cpus, num_gpus, slurm, on_done=done)
    finally:
        aggs = aggregate_all(dst, recs) if seeds is not None else {}
        write(dst, recs, run_id, command, meta, aggs)
    latest = Path(out_root)/'latest'
    try:
        if latest.is_symlink() or not latest.exists():
            if latest.is_symlink(): latest.unlink()
            latest.symlink_to(run_id)
    except OSError: pass
    return dst

# --- seed aggregation --------------------------------------------------------------------------------------------------

RATE = re.compile(r'^\s*([+-]?\d*\.?\d+)\s*\[\s*([+-]?\d*\.?\d+),\s*([+-]?\d*\.?\d+)\s*\]\s*\(n=(\d+)\)\s*$')   # 0.500 [0.150, 0.850] (n=4)
ESTIMATE = re.compile(r'^\s*([+-]?\d*\.?\d+)\s*\[\s*[+-]?\d*\.?\d+,\s*[+-]?\d*\.?\d+\s*\]\s*$')                 # +0.125 [-0.2, +0.4]

def parse_cell(v:str):
    "('rate', rate, n) for a rate with its n, ('number', x) for a number or an estimate with its interval, ('empty',), ('text', v)."
    v = '' if v is None else str(v)
    if not v.strip(): return ('empty',)
    if m := RATE.match(v): return ('rate', float(m.group(1)), int(m.group(4)))
    if m := ESTIMATE.match(v): return ('number', float(m.group(1)))
    if v.strip().lower() in ('true', 'false', 'nan', 'inf', '-inf'): return ('text', v)
    try: return ('number', float(v))
    except ValueError: return ('text', v)

def aggregate_cell(values:list[str], level=0.95) -> dict:
    "One table cell over seeds (None where a seed lacks it): mean, between-seed sd, n seeds, pooled interval."
    import numpy as np
    from scipy import stats
    from statsmodels.stats.proportion import proportion_confint
    parsed = [parse_cell(v) for v in values if v is not None]
    kinds = {p[0] for p in parsed} - {'empty'}
    out = dict(kind='empty', n_seeds=0, mean=None, sd=None, lo=None, hi=None, interval=None, successes=None, trials=None, equal=len(set(values)) <= 1)
    if not kinds: return out
    if kinds - {'rate', 'number'}:
        return dict(out, kind='text', n_seeds=sum(p[0] != 'empty' for p in parsed))
    xs = np.array([p[1] for p in parsed if p[0] != 'empty'], dtype=float)
    out.update(kind='rate' if kinds == {'rate'} else 'number', n_seeds=len(xs), mean=float(xs.mean()),
               sd=float(xs.std(ddof=1)) if len(xs) >= 2 else None)
    if out['kind'] == 'rate':
        k, n = sum(round(p[1]*p[2]) for p in parsed if p[0] == 'rate'), sum(p[2] for p in parsed if p[0] == 'rate')
        lo, hi = proportion_confint(k, n, alpha=1 - level, method='wilson') if n else (float('nan'),)*2
        out.update(successes=int(k), trials=int(n), lo=float(lo), hi=float(hi), interval='wilson, pooled over seeds')
    elif len(xs) >= 2:
        sem = stats.sem(xs)
        lo, hi = (out['mean'], out['mean']) if sem == 0 else stats.t.interval(level, len(xs) - 1, loc=out['mean'], scale=sem)
        out.update(lo=float(lo), hi=float(hi), interval='t over seeds')
    return out

def _fmt(x, d=3): return '' if x is None or (isinstance(x, float) and math.isnan(x)) else f'{x:.{d}f}'

def shown(a:dict, values:list, k:int) -> str:
    "A cell of the readable aggregated table."
    seeds = f' (seeds={a["n_seeds"]})' if a['n_seeds'] != k else ''
    if a['kind'] == 'empty': return ''
    if a['kind'] == 'text':
        return str(next(v for v in values if v is not None)) if a['equal'] else '**differs**: ' + ' / '.join(str(v) for v in values)
    if a['kind'] == 'rate':
        return f'{_fmt(a["mean"])} ± {_fmt(a["sd"]) or "n/a"}; pooled {a["successes"]}/{a["trials"]} = {_fmt(a["successes"]/a["trials"] if a["trials"] else None)} [{_fmt(a["lo"])}, {_fmt(a["hi"])}]{seeds}'
    if a['equal']: return f'{values[0]}{seeds}'
    ci = f' [{_fmt(a["lo"])}, {_fmt(a["hi"])}]' if a['lo'] is not None else ''
    return f'{_fmt(a["mean"])} ± {_fmt(a["sd"]) or "n/a"}{ci}{seeds}'

def aggregate_table(files:dict[int, Path], dst:Path) -> dict:
    "The CSV table of each seed (`{seed: path}`) cell by cell into `dst.with_suffix('.csv')` (per cell) and `.md`; a summary."
    import pandas as pd
    dfs = {s: pd.read_csv(f, dtype=str, keep_default_na=False) for s, f in sorted(files.items())}
    first = next(iter(dfs.values()))
    bad = [s for s, d in dfs.items() if list(d.columns) != list(first.columns) or d.shape != first.shape]
    if bad: return dict(reason=f'rows or columns differ between seeds (seed {bad[0]}: {dfs[bad[0]].shape} vs {first.shape}); not aggregated')
    k, rows, wide = len(dfs), [], []
    label_col = first.columns[0]
    for i in range(len(first)):
        line = {}
        for c in first.columns:
            vals = [d.iat[i, d.columns.get_loc(c)] for d in dfs.values()]
            a = aggregate_cell(vals)
            line[c] = shown(a, vals, k)
            rows.append(dict(row=i, label=' / '.join(sorted(set(str(d.iat[i, 0]) for d in dfs.values()))), column=c, **a,
                             **{f'seed{s}': v for s, v in zip(dfs, vals)}))
        wide.append(line)
    long = pd.DataFrame(rows)
    long.to_csv(dst.with_suffix('.csv'), index=False)
    differs = sorted({r['column'] for r in rows if r['kind'] == 'text' and not r['equal']})
    md = [f'Aggregated over {k} seeds ({", ".join(map(str, dfs))}) of `{files[next(iter(files))].name}`: each number is the mean ± the '
          'between-seed sd (ddof=1) [95% t interval over seeds]; each rate the mean ± sd of the per-seed rates, and the pooled '
          'successes/trials with their Wilson 95% interval. A cell the same in every seed is shown as it is.'
          + (f' **Differs between seeds**: {", ".join(differs)}.' if differs else ''), '',
          '| ' + ' | '.join(first.columns) + ' |', '|' + '---|'*len(first.columns)]
    md += ['| ' + ' | '.join(str(l[c]).replace('|', '\\|') for c in first.columns) + ' |' for l in wide]
    dst.with_suffix('.md').write_text('\n'.join(md) + '\n')
    return dict(csv=dst.with_suffix('.csv').name, md=dst.with_suffix('.md').name, seeds=list(dfs), differs=differs)

def aggregate_all(dst:Path, recs:list[dict]) -> dict:
    "For each notebook with ok seed cells, its CSV tables aggregated into `<nb>/aggregate/`: {nb: {table: summary}}."
    import pooled as figures   # tools/pooled.py loads pandas, scipy and cove: the aggregation needs them, a cell not
    out = {}
    for nb in dict.fromkeys(r['name'] for r in recs):
        ok = {r['seed']: dst/r['dir'] for r in recs if r['name'] == nb and r['seed'] is not None and r['status'] == 'ok'}
        if not ok: continue
        agg = dst/nb/'aggregate'; agg.mkdir(parents=True, exist_ok=True)
        tables = sorted({f.name for d in ok.values() for f in d.glob('*.csv')})
        res = {}
        for t in tables:
            have = {s: d/t for s, d in ok.items() if (d/t).exists()}
            if len(have) < len(ok): res[t] = dict(reason=f'only in seeds {sorted(have)}; not aggregated'); continue
            try: res[t] = aggregate_table(have, agg/Path(t).stem)
            except Exception as e: res[t] = dict(reason=f'{type(e).__name__}: {e}')
        try: pooled = pooled_paired_aggregate(ok, agg/'paired_pooled')
        except Exception as e: pooled = dict(reason=f'{type(e).__name__}: {e}')
        rates = figures.write_pooled(nb, ok, agg)   # the unpaired and non-rate figures the Claims page cites
        out[nb] = dict(seeds=sorted(ok), failed=sorted(r['seed'] for r in recs if r['name'] == nb and r['seed'] is not None and r['status'] != 'ok'),
                       tables=res, **({'paired_pooled': pooled} if pooled else {}), **({'pooled': rates} if rates else {}))
    (dst/'aggregate.json').write_text(json.dumps(out, indent=1, default=str) + '\n')
    return out

# --- pooled paired comparisons ----------------------------------------------------------------------------------------

COUNTS = ('both', 'a_only', 'b_only', 'neither')   # a paired.csv row's 2x2 table of tasks
POOLED_NOTE = ("Each comparison of the seeds' `paired.csv`, its per-task outcomes pooled over the seeds, stratified by "
               "seed (`cove.stats.pooled_paired`: the seeds' 2x2 tables summed; in each seed both runs played that "
               "seed's tasks in the same order): diff = the method's success rate minus the reference's (vs), its 95% "
               "interval by Newcombe's method 10, McNemar's exact p on the pooled discordant pairs (only / only vs), "
               "the MDE at 80% power for the pooled n; beside it each seed's own row (diff [95% CI], p, n, recomputed "
               "from the seed's episodes and checked against its paired.csv), and sd, the between-seed standard "
               "deviation of diff.")

def _arm_records(seed_dir:Path, name:str, measure:str|None) -> list[dict]:
    """The episode records of the arm `name` of a seed's paired.csv, read as its notebook paired them: a run folder
    `<name>/` (table2_main, router_pareto, trigger_timing, evolver_ablations), `<name>/test/` and `test_final/` for
    `X (final state)` (coevo_ablations), `transfer/<name>/` for memrl_epochs' transfer, else the arm's records of the
    seed's own episodes.jsonl (api_renaming: runs_of by `arm`, `split` as the family). ValueError naming what is
    missing."""
    from cove.core import read_jsonl
    from cove.stats import episode_records, runs_of, solved_once
    base = seed_dir/'transfer' if measure == 'transfer' else seed_dir
    if name.endswith(' (final state)'):
        d = base/name.removesuffix(' (final state)')
        dirs = [d/'test_final', d/'test']
    else: dirs = [base/name.removesuffix(' (frozen)'), base/name/'test']
    d = next((d for d in dirs if (d/'episodes.jsonl').exists()), None)
    if d is not None: recs = episode_records(d)
    elif (seed_dir/'episodes.jsonl').exists() and measure is None:
        arms = runs_of([r for r in read_jsonl(seed_dir/'episodes.jsonl') if 'arm' in r])
        if name not in arms: raise ValueError(f'{seed_dir.name}/episodes.jsonl has no episode of arm {name!r}')
        return arms[name]
    else:
        raise ValueError(f'{seed_dir.name}: no episodes.jsonl for {name!r} (looked in '
                         + ', '.join(str(x.relative_to(seed_dir)) for x in dirs) + ')')
    if measure == 'SR':   # memrl_epochs: the last epoch
        last = max(r.get('epoch', 0) for r in recs)
        return [r for r in recs if r.get('epoch', 0) == last]
    if measure == 'CSR': return solved_once(recs)
    if measure not in (None, 'transfer'): raise ValueError(f'measure {measure!r}: not known how to read its outcomes')
    return recs

def _seed_outcomes(seed_dir:Path, row:dict, cache:dict) -> tuple[list[bool], list[bool]]:
    "One paired.csv row's per-task outcomes (method, reference) in its seed, checked against the row's 2x2 table."
    from cove.stats import align, paired
    if lack := [k for k in ('method', 'reference', 'family', *COUNTS) if k not in row]:
        raise ValueError(f'{seed_dir.name}/paired.csv has no column {", ".join(lack)}')
    m, ref, fam, measure = row['method'], row['reference'], row['family'], row.get('measure') or None
    recs = {}
    for name in (m, ref):
        if (name, measure) not in cache: cache[name, measure] = _arm_records(seed_dir, name, measure)
        recs[name] = cache[name, measure]
    pairs = [(a, b) for a, b in align(recs[m], recs[ref], (m, ref)) if fam == 'overall' or a['family_spec'] == fam]
    if not pairs: raise ValueError(f'{seed_dir.name}: no episodes of family {fam!r}')
    a, b = [x['status'] == 'success' for x, _ in pairs], [y['status'] == 'success' for _, y in pairs]
    got, want = paired(a, b), {k: int(float(row[k])) for k in COUNTS}
    if {k: getattr(got, k) for k in COUNTS} != want:
        raise ValueError(f'{seed_dir.name}: its episodes give {", ".join(f"{k} {getattr(got, k)}" for k in COUNTS)}, '
                         f'its paired.csv {", ".join(f"{k} {v}" for k, v in want.items())}')
    return a, b

def _paired_fields(p) -> dict:
    "A `cove.stats.Paired` as the columns of paired_pooled.csv."
    return dict(n=p.n, a_rate=p.a_rate, b_rate=p.b_rate, diff=p.diff, ci_lo=p.ci[0], ci_hi=p.ci[1], p=p.p,
                a_only=p.a_only, b_only=p.b_only, both=p.both, neither=p.neither, mde=p.mde)

def _shown_paired(p) -> str:
    "`+0.125 [-0.100, +0.340] p 0.500 (3/1) n=24`: a Paired in one cell."
    return f'{p.diff:+.3f} [{p.ci[0]:+.3f}, {p.ci[1]:+.3f}] p {p.p:.3f} ({p.a_only}/{p.b_only}) n={p.n}'

def pooled_paired_aggregate(seed_dirs:dict[int, Path], dst:Path) -> dict | None:
    """The comparisons of the seeds' paired.csv pooled over the seeds (`cove.stats.pooled_paired`) into
    `dst.with_suffix('.csv')` (a pooled row and each seed's per comparison) and `.md`; a summary, or None where no seed
    wrote paired.csv. A comparison whose per-episode outcomes are not in the folders (or disagree with its paired.csv)
    is not pooled: a one-line reason instead."""
    import pandas as pd
    from cove.stats import pooled_paired
    tabs = {s: pd.read_csv(d/'paired.csv', dtype=str, keep_default_na=False)
            for s, d in sorted(seed_dirs.items()) if (d/'paired.csv').exists()}
    if not tabs: return None
    has_measure = any('measure' in t.columns for t in tabs.values())
    keys = ['measure', 'method', 'reference', 'family'] if has_measure else ['method', 'reference', 'family']
    rows = {}   # comparison -> {seed: its paired.csv row}, in the order first met
    for s, t in tabs.items():
        for r in t.to_dict('records'): rows.setdefault(tuple(r.get(k, '') for k in keys), {})[s] = r
    out, md_rows, reasons, caches = [], [], [], {s: {} for s in tabs}
    for key, by_seed in rows.items():
        head = dict(zip(keys, key))
        try:
            outcomes = {s: _seed_outcomes(seed_dirs[s], r, caches[s]) for s, r in by_seed.items()}
            pp = pooled_paired(outcomes)
        except ValueError as e:
            reasons.append(f'`{" / ".join(key)}`: not pooled: {e}')
            out.append(dict(head, seed='pooled', reason=str(e)))
            continue
        pooled = pp['pooled']
        out.append(dict(head, seed='pooled', seeds=' '.join(map(str, pp['seeds'])), seed_sd=pp['seed_sd'],
                        **_paired_fields(pooled)))
        out += [dict(head, seed=s, **_paired_fields(p)) for s, p in pp['per_seed'].items()]
        missing = [s for s in tabs if s not in by_seed]
        md_rows.append(dict(head, **{'pooled diff [95% CI]': f'{pooled.diff:+.3f} [{pooled.ci[0]:+.3f}, '
                                                                 f'{pooled.ci[1]:+.3f}]',
                                     'McNemar p (only / only vs)': f'{pooled.p:.3f} ({pooled.a_only}/{pooled.b_only})',
                                     'MDE': _fmt(pooled.mde) or 'n/a', 'n': pooled.n},
                            **{f'seed {s}': _shown_paired(pp['per_seed'][s]) if s in by_seed else '—' for s in tabs},
                            sd=_fmt(pp['seed_sd']) or 'n/a'))
        if missing: reasons.append(f'`{" / ".join(key)}`: not in the paired.csv of seed {", ".join(map(str, missing))}')
    pd.DataFrame(out).to_csv(dst.with_suffix('.csv'), index=False)
    md = [f'Paired comparisons pooled over seeds {", ".join(map(str, tabs))}. {POOLED_NOTE}', '']
    if md_rows:
        cols = list(md_rows[0])
        md += ['| ' + ' | '.join(c if c != 'reference' else 'vs' for c in cols) + ' |', '|' + '---|'*len(cols)]
        md += ['| ' + ' | '.join(str(r[c]).replace('|', '\\|') for c in cols) + ' |' for r in md_rows]
    elif reasons: md = [f'No pooled paired comparison: {reasons[0].split(": not pooled: ", 1)[-1]}']
    if md_rows and reasons: md += [''] + [f'- {r}' for r in reasons]
    dst.with_suffix('.md').write_text('\n'.join(md) + '\n')
    return dict(csv=dst.with_suffix('.csv').name, md=dst.with_suffix('.md').name, seeds=list(tabs),
                pooled=len(md_rows), not_pooled=len(rows) - len(md_rows))

# --- the index -----------------------------------------------------------------------------------------------------------

def index_md(recs:list[dict], run_id:str, command:str, meta:dict, aggs:dict, dst:Path) -> str:
    ok = sum(r['status'] == 'ok' for r in recs)
    seeds = meta.get('seeds')
    md = [f'# Experiment report {run_id}', '',
          f'{ok} of {meta["cells"]} grid cells succeeded ({len(recs)} finished) on the `{meta["engine"]}` engine'
          + (f', seeds {", ".join(map(str, seeds))}' if seeds is not None else '')
          + f'; total runtime {sum(r.get("seconds", 0) for r in recs):.0f} s (summed over cells). Written at commit {runs.git_commit()} (the commit each cell ran at is in its row). Command: `{command}`.', '']
    if meta.get('unseeded'):
        md += [f'**Ran once, no `seed` parameter**: {", ".join(meta["unseeded"])} (not repeated per seed, not aggregated).', '']
    failed = [r for r in recs if r['status'] != 'ok']
    if failed: md += ['**Failed cells**: ' + ', '.join(f'[{r["dir"]}](#{r["dir"].replace("/", "-")}) (`{(r.get("error") or "").splitlines()[0][:120] if r.get("error") else ""}`)' for r in failed), '']
    md += ['n: the distinct values of the `n` columns of each cell\'s CSV tables.', '',
           '| notebook | seed | status | runtime (s) | commit | n | tables | figures | executed notebook |', '|---|---|---|---|---|---|---|---|---|']
    for r in recs:
        d, a = r['dir'], r.get('artifacts') or {}
        tabs = ', '.join(f'[{t}]({d}/{t})' for t in a.get('tables', [])) or '—'
        figs = ', '.join(f'[{Path(f).stem}]({d}/{f})' for f in a.get('figures', [])) or '—'
        ex = f'[ipynb]({d}/{r["executed"]})' if r.get('executed') and (dst/d/r['executed']).exists() else '—'
        if r.get('html'): ex += f', [html]({d}/{r["html"]})'
        st = 'ok' if r['status'] == 'ok' else f'**{r["status"]}**'
        if r.get('resumed'): st += ' (an earlier run: --resume)'
        if runs.wiring(r): st += ' (**wiring check**: tiny model)'
        md.append(f'| [{r["name"]}](#{r["name"]}) | {"—" if r.get("seed") is None else r["seed"]} | {st} | {r.get("seconds", 0):.1f} | '
                  f'{r.get("commit") or "not recorded"} | '
                  f'{runs.fmt_n(r.get("n") or {})} | {tabs} | {figs} | {ex} |')
    for nb in dict.fromkeys(r['name'] for r in recs):
        mine = [r for r in recs if r['name'] == nb]
        md += ['', f'## {nb}', '', f'Parameters: `{json.dumps({k: v for k, v in mine[0]["params"].items() if k != "seed"}, ensure_ascii=False)}` '
               '(the rest at the notebook\'s defaults).']
        if any(runs.wiring(r) for r in mine): md += ['', f'**{runs.WIRING}**']
        if nb in aggs:
            g = aggs[nb]
            md += ['', f'### {nb}: aggregated over seeds {", ".join(map(str, g["seeds"]))}'
                   + (f' (failed seeds left out: {", ".join(map(str, g["failed"]))})' if g['failed'] else '')]
            for t, s in g['tables'].items():
                if 'reason' in s: md += ['', f'`{t}`: {s["reason"]}']
                else:
                    md += ['', f'`{t}` over seeds: [{s["md"]}]({nb}/aggregate/{s["md"]}), per cell [{s["csv"]}]({nb}/aggregate/{s["csv"]}); '
                           'per seed: ' + ', '.join(f'[seed {k}]({nb}/seed{k}/{t})' for k in s['seeds'])]
                    md += ['', (dst/nb/'aggregate'/s['md']).read_text().strip()]
            if pp := g.get('paired_pooled'):
                if 'reason' in pp: md += ['', f'Paired comparisons pooled over seeds: not written ({pp["reason"]})']
                else:
                    md += ['', f'Paired comparisons pooled over seeds: [{pp["md"]}]({nb}/aggregate/{pp["md"]}), '
                           f'per seed and pooled [{pp["csv"]}]({nb}/aggregate/{pp["csv"]})']
                    md += ['', (dst/nb/'aggregate'/pp['md']).read_text().strip()]
            if pr := g.get('pooled'):
                if 'reason' in pr: md += ['', f'Other pooled figures (tools/pooled.py): not written ({pr["reason"]})']
                else: md += ['', f'Other pooled figures: [{pr["md"]}]({nb}/aggregate/{pr["md"]})', '',
                             (dst/nb/'aggregate'/pr['md']).read_text().strip()]
        for r in mine:
            if r['status'] != 'ok':
                where = f' at cell {r["cell"]}' if r.get('cell') else ''
                md += ['', f'<a id="{r["dir"].replace("/", "-")}"></a>**{r["dir"]} {r["status"]}**{where}:', '', '```', r.get('error') or '', '```']
    return '\n'.join(md) + '\n'

def write(dst:Path, recs:list[dict], run_id:str, command:str, meta:dict, aggregates:dict):
    md = index_md(recs, run_id, command, meta, aggregates, dst)
    (dst/'index.md').write_text(md)
    (dst/'index.html').write_text(runs.md_to_html(md, f'Experiment report {run_id}'))
    (dst/'report.json').write_text(json.dumps([{k: v for k, v in r.items() if not k.startswith('_')} for r in recs], indent=1, default=str) + '\n')

# --- comparing two reports -------------------------------------------------------------------------------------------------

def compare_reports(a:Path, b:Path) -> list[str]:
    """Where two reports of the same grid differ, table cell by table cell: every CSV of every ok cell folder and every
    aggregated table, leaving out wall-clock columns (WALL_CLOCK: seconds, sec_per_step, ...). [] when equal."""
    import pandas as pd
    diffs = []
    ra, rb = (json.loads((p/'report.json').read_text()) for p in (a, b))
    sa, sb = ({(r['dir'], r['status']) for r in rs} for rs in (ra, rb))
    if sa != sb: diffs.append(f'cells or statuses differ: {sorted(sa ^ sb)}')
    files = sorted({str(f.relative_to(a)) for r in ra if r['status'] == 'ok' for f in (a/r['dir']).glob('*.csv')}
                   | {str(f.relative_to(a)) for f in a.glob('*/aggregate/*.csv')})
    files_b = sorted({str(f.relative_to(b)) for r in rb if r['status'] == 'ok' for f in (b/r['dir']).glob('*.csv')}
                     | {str(f.relative_to(b)) for f in b.glob('*/aggregate/*.csv')})
    if files != files_b: diffs.append(f'tables differ: {sorted(set(files) ^ set(files_b))}')
    for f in sorted(set(files) & set(files_b)):
        da, db = (pd.read_csv(p/f, dtype=str, keep_default_na=False) for p in (a, b))
        if 'aggregate' in Path(f).parts:   # one row per table cell: leave out the rows of wall-clock columns
            da, db = (d[~d['column'].str.contains(WALL_CLOCK)].reset_index(drop=True) for d in (da, db))
        else: da, db = (d[[c for c in d.columns if not WALL_CLOCK.search(c)]] for d in (da, db))
        if list(da.columns) != list(db.columns) or da.shape != db.shape: diffs.append(f'{f}: shape or columns differ'); continue
        ne = da.ne(db)
        for i, c in zip(*ne.to_numpy().nonzero()):
            diffs.append(f'{f} row {i} column {da.columns[c]!r}: {da.iat[i, c]!r} != {db.iat[i, c]!r}')
    return diffs

CELL_KEYS = dict(path=str, out=str, params=dict, name=str, dir=str)   # what `run_cell` reads of a cell, and its type

def parse_cell_arg(text:str) -> dict:
    "The grid cell `--cell JSON` gives, its keys of their types and its notebook a file (a one-line SystemExit else)."
    try: c = json.loads(text)
    except ValueError as e: raise SystemExit(f'--cell: not JSON ({e})') from None
    if not isinstance(c, dict): raise SystemExit(f'--cell: a JSON object (one grid cell), not a {type(c).__name__}')
    if bad := [k for k, t in CELL_KEYS.items() if not isinstance(c.get(k), t)]:
        raise SystemExit(f'--cell: needs {", ".join(f"{k} ({CELL_KEYS[k].__name__})" for k in bad)}')
    if not (isinstance(c.get('seed'), int) or c.get('seed') is None) or isinstance(c.get('seed'), bool):
        raise SystemExit(f'--cell: seed must be an integer or null, not {str(c.get("seed"))[:40]!r}')
    if not Path(c['path']).is_file() or Path(c['path']).suffix != '.ipynb':
        raise SystemExit(f'--cell: path {c["path"][:200]!r} is not a notebook file')
    t = c.get('timeout')
    if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float('inf')):
        raise SystemExit(f'--cell: timeout must be a positive number of seconds or null, not {str(t)[:40]!r}')
    runs.check_out_root(c['out'])
    return c

if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--cell':   # one grid cell, in a child process of an engine
        import signal
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        try: c = parse_cell_arg(sys.argv[2])
        except SystemExit as e:
            print(f'tools/sweep.py: {e.code}', file=sys.stderr)
            sys.exit(2)
        r = run_cell(c, c.get('timeout'), c.get('html', True))
        print(json.dumps(r, default=str))
        sys.exit(0)
    print('usage: tools/sweep.py --cell JSON (one grid cell, what an engine starts); a grid is '
          'tools/report.py --seeds/--engine/--workers (make experiments ARGS=...)', file=sys.stderr)
    sys.exit(2)
