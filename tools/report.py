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
"""
import argparse, ast, csv, html, json, logging, os, re, shlex, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT/'nbs'/'experiments'

def notebooks(folder=NBS) -> list[Path]:
    "Every experiment notebook in `folder`, sorted by name (whatever exists: no hard-coded list)."
    return sorted(p for p in Path(folder).glob('*.ipynb') if not p.name.startswith(('.', '_')))

def _params_cell(nb:dict):
    return next((c for c in nb['cells'] if c['cell_type'] == 'code' and 'parameters' in c.get('metadata', {}).get('tags', [])), None)

def inspect_params(path) -> tuple[list, list[str]]:
    "papermill's own inference of `path`'s parameters (what `papermill --help-notebook` prints) and the warnings it logged."
    from papermill.inspection import _infer_parameters
    from papermill.iorw import load_notebook_node
    records = []
    class Grab(logging.Handler):
        def emit(self, r): records.append(r.getMessage())
    log, h = logging.getLogger('papermill'), Grab(logging.WARNING)
    log.addHandler(h)
    try: params = _infer_parameters(load_notebook_node(str(path)))
    finally: log.removeHandler(h)
    return params, records

def param_problems(path) -> list[str]:
    """What keeps `papermill --help-notebook` from listing every parameter of `path` with its type and comment:
    lines papermill cannot parse, assignments it drops silently, parameters without a type or without a help comment."""
    nb = json.loads(Path(path).read_text())
    cell = _params_cell(nb)
    if cell is None: return ['no cell tagged parameters']
    src = ''.join(cell['source'])
    try: tree = ast.parse(src)
    except SyntaxError as e: return [f'parameters cell does not parse as Python: {e}']
    declared = [n.id if isinstance(s, ast.Assign) else s.target.id for s in tree.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                for n in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(n, ast.Name)]
    probs = [f'not an assignment: line {s.lineno}' for s in tree.body if not isinstance(s, (ast.Assign, ast.AnnAssign))]
    params, warnings = inspect_params(path)
    probs += warnings
    got = {p.name: p for p in params}
    probs += [f'{n}: papermill does not see it (bad annotation, a second "=" or "#" in the line?)' for n in declared if n not in got]
    for p in params:
        if p.inferred_type_name in ('None', ''): probs.append(f'{p.name}: no type (write `{p.name}: TYPE = ...`)')
        if not p.help: probs.append(f'{p.name}: no help comment (`# ...` after the value)')
    return probs

def declared_params(path) -> set[str]:
    return {p.name for p in inspect_params(path)[0]}

# --- parameters from the command line ---------------------------------------------------------------------------------

def _value(s:str):
    "papermill's `-p` value syntax: True/False/None, int, float, else the string."
    from papermill.cli import _resolve_type
    return _resolve_type(s)

def split_params(pairs, params_json, model, names, plugins=None) -> tuple[dict, dict]:
    "Global parameters (to each notebook that declares them), per-notebook ones ({name: {...}}); `plugins`: --plugin's."
    glob, per = {}, {}
    if params_json:
        for k, v in json.loads(params_json).items():
            if k in names and isinstance(v, dict): per.setdefault(k, {}).update(v)
            else: glob[k] = v
    for k, v in pairs or []:
        nbname, _, key = k.rpartition('.')
        if nbname:
            if nbname not in names: raise SystemExit(f'-p {k}: no notebook {nbname!r} (have {", ".join(sorted(names))})')
            per.setdefault(nbname, {})[key] = _value(v)
        else: glob[k] = _value(v)
    if model: glob['model'] = model
    mods = [x.strip() for p in plugins or [] for x in p.split(',') if x.strip()]
    if mods: glob['plugins'] = ','.join(mods)
    return glob, per

# --- running ---------------------------------------------------------------------------------------------------------

def _stuck_cell(executed:Path):
    "The execution count of the last code cell papermill started (a cell timeout names no cell)."
    try:
        started = [c for c in json.loads(executed.read_text())['cells']
                   if c['cell_type'] == 'code' and c.get('metadata', {}).get('papermill', {}).get('start_time')]
        return started[-1].get('execution_count') if started else None
    except Exception: return None

class Interrupted(Exception):
    "Ctrl-C (or SIGTERM) during a notebook: carries its record so the index still lists what ran."
    def __init__(self, rec): super().__init__(rec['name']); self.rec = rec

def run_notebook(path:Path, out:Path, params:dict, timeout=None) -> dict:
    "Execute `path` with papermill into `out/` (its out_dir); returns status, runtime and the error of a failure."
    import papermill as pm
    out.mkdir(parents=True, exist_ok=True)
    executed = out/path.name
    rec = dict(name=path.stem, notebook=str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
               params={k: v for k, v in params.items() if k != 'out_dir'}, executed=executed.name)
    t0 = time.time()
    try:
        pm.execute_notebook(str(path), str(executed), parameters=dict(params, out_dir=str(out)), cwd=str(ROOT),
                            progress_bar=False, log_output=False, execution_timeout=timeout)
        rec.update(status='ok')
    except KeyboardInterrupt:
        rec.update(status='interrupted', error='KeyboardInterrupt: the run was stopped here', seconds=round(time.time() - t0, 1))
        raise Interrupted(rec)
    except Exception as e:   # a failed notebook is reported, the others still run
        ename, evalue = getattr(e, 'ename', type(e).__name__), getattr(e, 'evalue', str(e))
        rec.update(status='failed', error=f'{ename}: {evalue}'.strip()[:2000], cell=getattr(e, 'exec_count', None) or _stuck_cell(executed))
    rec['seconds'] = round(time.time() - t0, 1)
    return rec

# --- what a run left -------------------------------------------------------------------------------------------------

N_COL = re.compile(r'^(n|.* n)$')

def sample_sizes(out:Path) -> dict:
    "The sample sizes a notebook's tables carry: the distinct values of each `n` column (`n`, `<x> n`), per CSV file."
    sizes = {}
    for f in sorted(out.glob('*.csv')):
        try: rows = list(csv.DictReader(f.open()))
        except Exception: continue
        cols = [c for c in (rows[0].keys() if rows else []) if c and N_COL.match(c.strip())]
        vals = sorted({r[c] for r in rows for c in cols if r.get(c) not in (None, '')}, key=lambda v: (len(v), v))
        if vals: sizes[f.name] = vals
    if not sizes and (out/'table.md').exists():   # no n column: the `(n=...)` of the rate cells
        vals = sorted(set(re.findall(r'\(n=(\d+)\)', (out/'table.md').read_text())), key=int)
        if vals: sizes['table.md'] = vals
    return sizes

def artifacts(out:Path) -> dict:
    "Tables (Markdown, CSV), figures and metrics a notebook wrote, as paths relative to `out`."
    rel = lambda ps: [str(p.relative_to(out)) for p in ps]
    return dict(tables=rel(sorted(out.glob('*.md')) + sorted(out.glob('*.csv'))),
                figures=rel(sorted(p for p in out.rglob('*.png') if 'adapters' not in p.parts)),
                metrics=rel(sorted(out.glob('metrics.json'))))

# nbconvert's lab page, less what it loads from the network (require.js, MathJax, mermaid, the widget manager): the
# report opens offline. Images are embedded already (data: URIs of the notebook's image/png outputs).
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
NETWORK = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)\s*=\s*["\']?(?:https?:)?//', re.I)

def offline_html(executed:Path) -> str:
    "`executed` as one HTML page that loads nothing from the network: figures inline, no CDN script or stylesheet."
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    ex = HTMLExporter(template_name='lab', extra_loaders=[DictLoader({'cove_offline.html.j2': OFFLINE_TEMPLATE})],
                      template_file='cove_offline.html.j2')
    body, _ = ex.from_filename(str(executed))
    if m := NETWORK.search(body): raise ValueError(f'the page would load from the network: {m.group(0)}')
    return body

def notebook_html(executed:Path) -> str | None:
    "The executed notebook as HTML (nbconvert), so the report opens in a browser without Jupyter; None if it cannot."
    try:
        dst = executed.with_suffix('.html')
        dst.write_text(offline_html(executed))
        return dst.name
    except Exception as e:
        print(f'  (no HTML for {executed.name}: {type(e).__name__}: {e})', file=sys.stderr)
        return None

def _git() -> str:
    try:
        head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return head + (' (with uncommitted changes)' if dirty else '')
    except Exception: return 'unknown'

def _fmt_n(sizes:dict) -> str:
    vals = sorted({v for vs in sizes.values() for v in vs}, key=lambda v: (len(v), v))
    return ', '.join(vals) if vals else '—'

WIRING = ("WIRING CHECK: model 'tiny' is a random, untrained model; this run tests that the code runs end to end. "
          "Its numbers say nothing about any method.")   # cove.experiment.WIRING_NOTE (tools/ imports no cove)

def wiring(rec:dict) -> bool:
    "Whether a notebook ran on the tiny random model (a wiring check, not a result)."
    return rec.get('params', {}).get('model') == 'tiny'

def index_md(recs:list[dict], run_id:str, command:str) -> str:
    ok = sum(r['status'] == 'ok' for r in recs)
    md = [f'# Experiment report {run_id}', '',
          f'{ok} of {len(recs)} notebooks succeeded; total runtime {sum(r["seconds"] for r in recs):.0f} s. '
          f'Commit {_git()}. Command: `{command}`.', '',
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
        md.append(f'| [{nm}](#{nm}) | {st} | {r["seconds"]:.1f} | {_fmt_n(r["n"])} | {tabs} | {figs} | {nbl} |')
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

CSS = ('body{font-family:system-ui,sans-serif;max-width:72em;margin:2em auto;padding:0 1em;line-height:1.4}'
       'table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;font-size:90%}'
       'img{max-width:100%}pre{background:#f6f6f6;padding:.5em;overflow:auto}code{background:#f6f6f6}')

def md_to_html(md:str, title:str) -> str:
    "Markdown to a standalone HTML page, offline: markdown-it-py (tables on), else mistune (nbconvert's), else <pre>."
    try:
        from markdown_it import MarkdownIt
        body = MarkdownIt('commonmark', {'html': False}).enable('table').render(md)
        body = re.sub(r'<h2>([^<]+)</h2>', lambda m: f'<h2 id="{m.group(1)}">{m.group(1)}</h2>', body)
    except ImportError:
        try:
            import mistune; body = mistune.html(md)
        except ImportError: body = f'<pre>{html.escape(md)}</pre>'
    return f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n{body}</body></html>\n'

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
    a = ap.parse_args(argv)
    if a.check_params is not None:
        bad = 0
        for p in [Path(x) for x in a.check_params] or notebooks():
            probs = param_problems(p); bad += bool(probs)
            print(f'{p}: ' + ('ok' if not probs else '\n  ' + '\n  '.join(probs)))
        return 1 if bad else 0
    names = {p.stem for p in notebooks()}
    glob_params, per = split_params(a.parameter, a.params, a.model, names, a.plugin)
    only = [n.strip() for n in a.only.split(',') if n.strip()] if a.only else None
    command = shlex.join(['tools/report.py'] + list(argv if argv is not None else sys.argv[1:]))
    if a.seeds is not None or a.engine is not None or a.workers is not None:   # a grid; else one notebook after another, as before
        import sweep
        try: seeds = [int(x) for x in a.seeds.split(',') if x.strip()] if a.seeds is not None else None
        except ValueError: raise SystemExit(f'--seeds {a.seeds}: comma-separated integers, e.g. 0,1,2')
        if seeds is not None and (not seeds or len(set(seeds)) != len(seeds)): raise SystemExit(f'--seeds {a.seeds}: distinct integers, e.g. 0,1,2')
        dst = sweep.sweep(only, glob_params, per, seeds, a.engine or 'local', Path(a.out), a.run_id, a.timeout, command=command,
                          html_notebooks=not a.no_html_notebooks, workers=a.workers, ray_address=a.ray_address, num_cpus=a.num_cpus,
                          num_gpus=a.num_gpus, slurm=dict(partition=a.slurm_partition, time=a.slurm_time))
    else: dst = report(only, glob_params, per, Path(a.out), a.run_id, a.timeout, command=command, html_notebooks=not a.no_html_notebooks)
    recs = json.loads((dst/'report.json').read_text())
    print(f'report: {dst/"index.html"} ({sum(r["status"] == "ok" for r in recs)}/{len(recs)} ok)')
    return 0 if all(r['status'] == 'ok' for r in recs) else 1

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGTERM, signal.default_int_handler)   # kill PID: index.md still lists what ran
    sys.exit(main())
