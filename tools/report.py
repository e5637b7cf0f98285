#!/usr/bin/env python3
"""Run every experiment notebook (`nbs/experiments/*.ipynb`) with papermill and write a report a reader can open.

`make experiments` calls this. Each notebook runs at its own smoke defaults (its parameters cell) unless told
otherwise, writes its tables and figures into `outputs/report/<run_id>/<name>/` (its `out_dir`), and the
executed notebook lands next to them. `index.md` and `index.html` link every table and figure with the
notebook's sample sizes (the `n` columns of its tables) and its runtime. A notebook that fails is listed as
failed with its error; the others still run.

usage:
  tools/report.py                                   every notebook at its smoke defaults
  tools/report.py --model tiny --only calibration,learning_curve -p learning_curve.steps 0,1
  tools/report.py --params '{"n_eval": 2, "calibration": {"n": 1}}'
  tools/report.py --plugin mytask --only table2_main -p families units   a family of your own (cove.plugins)
  tools/report.py --check-params [NB ...]           papermill parses every parameter line, with a type and a help

`-p NAME VALUE` (papermill's value syntax) goes to every notebook whose parameters cell declares NAME;
`-p NB.NAME VALUE` to notebook NB only. `--params JSON` does the same: a key naming a notebook holds that
notebook's parameters. `--model M` is `-p model M`; `--plugin MOD` (repeatable, or a comma list) is `-p plugins MOD`:
every notebook loads those modules of your own before it checks its families and methods.

A grid (tools/sweep.py): `--seeds 0,1,2` runs every notebook declaring `seed` once per seed, each into
`<name>/seed<k>/`, and aggregates its tables over the seeds (mean, between-seed sd, n seeds, pooled interval) into
`<name>/aggregate/`; a notebook without `seed` runs once and is listed. `--engine local` (a pool of `--workers`
processes, default the cores), `ray` (`--ray-address`, `--num-cpus`/`--num-gpus` per cell) or `slurm` (submitit:
`--slurm-partition`, `--slurm-time`) runs the cells; ray and slurm need `pip install 'cove[cluster]'`.
  tools/report.py --engine ray --seeds 0,1 --only calibration,learning_curve --model tiny

`--scale cpu` gives each notebook its named parameter set (`SCALES` in tools/experiment_runs.py: the sizes at which
it decides on 2 cores, n >= 64 per compared arm over seeds 0,1,2); a `-p`, `--params` or `--model` given names
wins over the preset. `--resume` (a grid, with `--run-id`) skips the cells an earlier run into that folder finished
ok with the same parameters and runs the rest: `make experiments-cpu` is
  tools/report.py --scale cpu --seeds 0,1,2 --run-id cpu --resume
Where the seed folders hold a `paired.csv` and the run folders it came from, `<name>/aggregate/paired_pooled.md`
(and .csv) pools each comparison's per-task pairs over the seeds (cove.stats.pooled_paired), each seed's row beside it.
"""
import argparse, json, os, shlex, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT/'tools') not in sys.path: sys.path.insert(0, str(ROOT/'tools'))
from experiment_runs import check_numbers, check_out_root, scaled_params, SCALES
from experiment_runs import (NBS, NETWORK, WIRING, Interrupted, artifacts, declared_params, inspect_params,   # noqa: F401
                             md_to_html, notebook_html, notebooks, param_problems, run_notebook, sample_sizes, split_params,
                             wiring, fmt_n, git_commit)
import sweep

def index_md(recs:list[dict], run_id:str, command:str) -> str:
    ok = sum(r['status'] == 'ok' for r in recs)
    md = [f'# Experiment report {run_id}', '',
          f'{ok} of {len(recs)} notebooks succeeded; total runtime {sum(r["seconds"] for r in recs):.0f} s. '
          f'Commit {git_commit()}. Command: `{command}`.', '',
          'n: the distinct values of the `n` columns (`n`, `<family> n`, ...) of each notebook\'s CSV tables, else the '
          '`(n=...)` of its table.md rates; — where a notebook wrote neither.', '',
          '| notebook | status | runtime (s) | n | tables | figures | executed notebook |', '|---|---|---|---|---|---|---|']
    for r in recs:
        nm = r['name']; a = r['artifacts']
        tabs = ', '.join(f'[{t}]({nm}/{t})' for t in a['tables']) or '—'
        figs = ', '.join(f'[{Path(f).stem}]({nm}/{f})' for f in a['figures']) or '—'
        nbl = f'[ipynb]({nm}/{r["executed"]})' + (f', [html]({nm}/{r["html"]})' if r.get('html') else '')
        st = 'ok' if r['status'] == 'ok' else f'**{r["status"]}**'
        if wiring(r): st += ' (**wiring check**: tiny model)'
        md.append(f'| [{nm}](#{nm}) | {st} | {r["seconds"]:.1f} | {fmt_n(r["n"])} | {tabs} | {figs} | {nbl} |')
    for r in recs:
        nm = r['name']; a = r['artifacts']
        md += ['', f'## {nm}', '', f'`{r["notebook"]}`: {r["status"]} in {r["seconds"]:.1f} s. '
               f'Parameters: `{json.dumps(r["params"], ensure_ascii=False)}` (the rest at the notebook\'s defaults).']
        if wiring(r): md += ['', f'**{WIRING}**']
        if r['status'] != 'ok':
            where = f' at cell {r["cell"]}' if r.get('cell') else ''
            md += ['', f'**{r["status"].capitalize()}**{where}: `{r["error"].splitlines()[0] if r["error"] else ""}`', '',
                   '```', r['error'], '```']
        for f, vals in r['n'].items(): md += ['', f'n in `{f}`: {", ".join(vals)}']
        if (tmd := Path(r["_out"])/"table.md").exists():
            md += ["", f"[table.md]({nm}/table.md):", "", tmd.read_text().strip()]
        for f in a['figures']: md += ['', f'![{nm} {f}]({nm}/{f})']
    return '\n'.join(md) + '\n'

def report(names=None, glob_params=None, per_params=None, out_root=ROOT/'outputs'/'report', run_id=None, timeout=None,
           folder=NBS, command='tools/report.py', html_notebooks=True) -> Path:
    "Run the notebooks (all of `folder`, or `names`), write `<out_root>/<run_id>/` with index.md/index.html; returns that folder."
    nbs = notebooks(folder)
    if names:
        have = {p.stem: p for p in nbs}
        missing = [n for n in names if n not in have]
        if missing: raise SystemExit(f'no experiment notebook {", ".join(missing)} (have {", ".join(have)})')
        nbs = [have[n] for n in names]
    run_id = run_id or time.strftime('%Y%m%d-%H%M%S')
    dst = Path(out_root)/run_id; dst.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault('HF_HUB_OFFLINE', '1'); os.environ.setdefault('TRANSFORMERS_OFFLINE', '1')
    recs = []
    for p in nbs:
        decl = declared_params(p)
        params = {k: v for k, v in (glob_params or {}).items() if k in decl} | (per_params or {}).get(p.stem, {})
        print(f'{p.stem}: running {json.dumps(params)}', flush=True)
        try: r = run_notebook(p, dst/p.stem, params, timeout)
        except Interrupted as e:
            recs.append(dict(e.rec, n={}, artifacts=artifacts(dst/p.stem), _out=str(dst/p.stem)))
            _write(dst, recs, run_id, command); raise KeyboardInterrupt
        out = dst/p.stem
        r.update(n=sample_sizes(out), artifacts=artifacts(out), _out=str(out))
        if html_notebooks and (out/r['executed']).exists(): r['html'] = notebook_html(out/r['executed'])
        print(f'{p.stem}: {r["status"]} in {r["seconds"]} s' + (f' ({r["error"].splitlines()[0] if r["error"] else ""})' if r['status'] != 'ok' else ''), flush=True)
        recs.append(r)
        _write(dst, recs, run_id, command)   # the index is current after every notebook
    latest = Path(out_root)/'latest'
    try:
        if latest.is_symlink() or not latest.exists():
            if latest.is_symlink(): latest.unlink()
            latest.symlink_to(run_id)
    except OSError: pass
    return dst

def _write(dst:Path, recs:list[dict], run_id:str, command:str):
    md = index_md(recs, run_id, command)
    (dst/'index.md').write_text(md)
    (dst/'index.html').write_text(md_to_html(md, f'Experiment report {run_id}'))
    (dst/'report.json').write_text(json.dumps([{k: v for k, v in r.items() if not k.startswith('_')} for r in recs], indent=1, default=str) + '\n')

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split('\n', 1)[1])
    ap.add_argument('--model', help='policy for every notebook that has a `model` parameter (tiny: wiring check)')
    ap.add_argument('--only', help='comma-separated notebook names (default: every notebook in nbs/experiments/)')
    ap.add_argument('-p', '--parameter', nargs=2, action='append', metavar=('NAME', 'VALUE'), help='papermill parameter; NB.NAME for one notebook')
    ap.add_argument('--plugin', action='append', default=[], metavar='MODULE',
                    help='a module of your own (repeatable, or a comma list): the plugins parameter of every notebook')
    ap.add_argument('--params', help='JSON parameters; a key naming a notebook holds that notebook\'s own')
    ap.add_argument('--out', default=str(ROOT/'outputs'/'report'), help='report root (default outputs/report)')
    ap.add_argument('--run-id', help='folder name under --out (default: the start time)')
    ap.add_argument('--timeout', type=float, help='seconds per cell before it fails')
    ap.add_argument('--no-html-notebooks', action='store_true', help='skip nbconvert of each executed notebook')
    ap.add_argument('--check-params', nargs='*', metavar='NB', help='check papermill parses every parameter line (default: all notebooks)')
    ap.add_argument('--scale', metavar='NAME', help=f'a named parameter set per notebook ({", ".join(SCALES)}: '
                                                    'tools/experiment_runs.py SCALES); -p/--params win over it')
    g = ap.add_argument_group('grid (tools/sweep.py): any of these runs the notebooks as a grid of cells')
    g.add_argument('--seeds', help='comma-separated seeds: each notebook declaring `seed` runs once per seed, its tables aggregated')
    g.add_argument('--engine', choices=['local', 'ray', 'slurm'], help='local: a process pool (default); ray: Ray tasks; slurm: submitit jobs')
    g.add_argument('--workers', type=int, help='local: parallel cells (default: the cores), each with cores // workers torch threads; '
                                               'ray without --ray-address: the local Ray\'s CPUs')
    g.add_argument('--ray-address', help='ray: a cluster to join (ray.init(address=...)); default a local Ray')
    g.add_argument('--num-cpus', type=float, default=1, help='ray/slurm: CPUs per cell (default 1; also its torch threads)')
    g.add_argument('--num-gpus', type=float, default=0, help='ray/slurm: GPUs per cell (default 0)')
    g.add_argument('--slurm-partition', help='slurm: the partition')
    g.add_argument('--slurm-time', type=int, default=60, help='slurm: minutes per cell (default 60)')
    g.add_argument('--resume', action='store_true',
                   help='with --run-id: skip the cells an earlier run into that folder finished ok with the same '
                        'parameters; run the rest')
    a = ap.parse_args(argv)
    if a.check_params is not None:
        bad = 0
        for x in a.check_params:
            if not Path(x).is_file(): raise SystemExit(f'--check-params {x}: no such notebook file')
        for p in [Path(x) for x in a.check_params] or notebooks():
            probs = param_problems(p); bad += bool(probs)
            print(f'{p}: ' + ('ok' if not probs else '\n  ' + '\n  '.join(probs)))
        return 1 if bad else 0
    names = {p.stem for p in notebooks()}
    glob_params, per = split_params(a.parameter, a.params, a.model, names, a.plugin)
    per = scaled_params(a.scale, names, glob_params, per)
    if a.resume and a.run_id is None: raise SystemExit('--resume needs --run-id: the run folder to finish')
    check_numbers(a)
    check_out_root(a.out, a.run_id)   # before anything is written
    only = [n.strip() for n in a.only.split(',') if n.strip()] if a.only else None
    command = shlex.join(['tools/report.py'] + list(argv if argv is not None else sys.argv[1:]))
    if a.seeds is not None or a.engine is not None or a.workers is not None or a.resume:   # a grid, else one by one
        try: seeds = [int(x) for x in a.seeds.split(',') if x.strip()] if a.seeds is not None else None
        except ValueError: raise SystemExit(f'--seeds {a.seeds}: comma-separated integers, e.g. 0,1,2')
        if seeds is not None and (not seeds or len(set(seeds)) != len(seeds)): raise SystemExit(f'--seeds {a.seeds}: distinct integers, e.g. 0,1,2')
        dst = sweep.sweep(only, glob_params, per, seeds, a.engine or 'local', Path(a.out), a.run_id, a.timeout, command=command,
                          html_notebooks=not a.no_html_notebooks, workers=a.workers, ray_address=a.ray_address, num_cpus=a.num_cpus,
                          num_gpus=a.num_gpus, slurm=dict(partition=a.slurm_partition, time=a.slurm_time),
                          resume=a.resume)
    else: dst = report(only, glob_params, per, Path(a.out), a.run_id, a.timeout, command=command, html_notebooks=not a.no_html_notebooks)
    recs = json.loads((dst/'report.json').read_text())
    print(f'report: {dst/"index.html"} ({sum(r["status"] == "ok" for r in recs)}/{len(recs)} ok)')
    return 0 if all(r['status'] == 'ok' for r in recs) else 1

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGTERM, signal.default_int_handler)   # kill PID: index.md still lists what ran
    try: sys.exit(main())
    except KeyboardInterrupt:   # the index was written on the way out; no traceback for a stop the user asked for
        print('tools/report.py: stopped; index.md lists what ran (a grid goes on where it stopped with the same '
              '--run-id and --resume)', file=sys.stderr)
        sys.exit(130)
    except SystemExit as e:
        if not isinstance(e.code, str): raise
        print(f'tools/report.py: {e.code.strip().splitlines()[0] if e.code.strip() else "refused"}', file=sys.stderr)
        sys.exit(2)   # a bad argument: one line, exit 2
