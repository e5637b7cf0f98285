#!/usr/bin/env python3
"""What tools/report.py (the notebooks one after another) and tools/sweep.py (a grid of them) share: the experiment
notebooks and their parameters cells, one papermill run and what it left (sample sizes, tables, figures, its offline
HTML), and the pieces of a report page. Neither script is imported here: both import this one."""
import ast, csv, html, json, logging, math, os, re, subprocess, sys, time
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
    "The names of the parameters papermill finds in `path`'s parameters cell."
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
        try: given = json.loads(params_json)
        except ValueError as e: raise SystemExit(f'--params: not JSON ({e})') from None
        if not isinstance(given, dict):
            raise SystemExit(f'--params: a JSON object of parameters, e.g. \'{{"n_eval": 2}}\', not a {type(given).__name__}')
        for k, v in given.items():
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

# --- named parameter sets (`--scale`) ---------------------------------------------------------------------------------

# `tools/report.py --scale cpu` (`make experiments-cpu`): per notebook, the parameters under which it decides at CPU
# scale, n >= 64 per compared arm pooled over seeds 0,1,2 (>= 22 tasks per arm per seed), each notebook's 3 seeds in
# about 45 minutes of the 2-core machine with smollm2-135m on hf bf16. The arithmetic of each comment: E = the
# episodes of Base it costs (an episode of a method that learns counts 2), at 38 Base episodes/min; U = LoRA/GRPO
# updates at 15 s; L = model loads and setup, 1 min per seed. Minutes are those of the whole machine: `make
# experiments-cpu` keeps both workers busy; one notebook alone (ONLY=x) plays its third seed on one core, x 4/3.
# Estimates, not timings: the budgets batch 2-4 episodes per generate call, the 38/min was measured at 16, so
# the runtime column of the first report's index.md is the number to trust.
# A first try (2026-12-06, router_pareto) played about 1.2 episodes a minute per worker: each worker then ran two
# torch threads on two cores shared with the other (cove ignored OMP_NUM_THREADS, fixed in 7f84cf0); with one thread
# each, Base plays about 20 episodes a minute per worker. Keys: declared parameters only
# (tests/test_cpu_scale.py). A dict value (budget) replaces the notebook's whole default.
SCALES = {'cpu': {
    # 9 methods x 22 (11 x math,tableqa): 2 x 22 + 7 learning x 44 = 352 E 9.3 min, ~16 U 4 min, L 1: 14.3 x 3 = 43 min
    'table2_main': {'episodes': 11},
    # 3 routers x 32 (16 x math,tableqa), all learning: 192 E 5.1 min, ~12 U 3 min, L 1: 9.1 x 3 = 27 min; n 96
    'router_pareto': {'episodes': 16},
    # 6 arms x 22 math: 22 + 5 x 44 = 242 E 6.4 min, 11 always_on + ~16 triggered U 6.8 min, L 1: 14.2 x 3 = 43 min
    'trigger_timing': {'episodes': 22},
    # 5 variants x 22 math, 2 turns: 220 E 5.8 min, GRPO every 4 episodes 5 x 4 U 5 min, distillation + L 2 min:
    # 12.8 x 3 = 38 min (the smoke budget's updates every 2 would be 44 U per seed, 33 min of updates alone)
    'evolver_ablations': {'episodes': 22, 'budget': {
        'model.batch_size': 4, 'model.max_new_tokens': 48, 'evolver.max_turns': 2, 'evolver.train_every': 4,
        'evolver.prune_every': 4, 'train.grpo_generations': 2}},
    # 4 variants (no_temporal_expansion fails by design, 0 s), each 16 train x 2 + 5 checkpoints x 4 validation +
    # 22 frozen test = 74 E, + coevo's final state 22: 318 E 8.4 min, L 1: 9.4 x 3 = 28 min; n 66 per variant (test)
    'coevo_ablations': {'episodes': 16, 'val_episodes': 4, 'test_episodes': 22, 'budget': {
        'model.batch_size': 4, 'model.max_new_tokens': 48, 'coevo.phase_len': 4, 'coevo.k': 2}},
    # Base, Evo-Memory (RAG) and MemRL x 22 math x 3 epochs, transfer on 22 held-out: n 66 per variant for SR, CSR and
    # transfer (FR's n is its failures). Measured 2026-12-06 (Intel Xeon AMX, bf16, 1 thread per worker): Base 66
    # episodes in 3 min, a memory variant about 4 episodes a minute (an LLM summary per episode), so each memory
    # variant costs ~16 min a seed: `memrl_td` (MC vs TD, no claim of the paper's tables) is left to `-p variants`.
    'memrl_epochs': {'episodes': 22, 'epochs': 3, 'transfer_episodes': 22, 'variants': 'base,evo_memory,memrl'},
    # 4 arms x 2 splits x 22 = 176 E (+ memory prompts) 5 min, 2 adapters x 16 steps x 10 s 5.3 min (the README's 16
    # steps), L 2: 12.3 x 3 = 37 min; n 66 per arm and split, 132 per arm
    'api_renaming': {'n_train': 32, 'n_eval': 22, 'max_steps': 16},
    # 2 adapters x 16 steps x 10 s 5.3 min, attention of 3 models on 32 inputs ~1 min, L 2: 8.3 x 3 = 25 min;
    # n 96 inputs pooled (a paired difference per input, not a rate)
    'attention_shift': {'n_train': 32, 'max_steps': 16, 'n_inputs': 32},
    # 4 families x 2 shot counts x 32 = 256 E, 2-shot prompts x 1.3: 290 E 7.6 min, L 0.5: 8.1 x 3 = 24 min;
    # n 96 per cell
    'calibration': {'n': 32},
    # 4 checkpoints x 32 = 128 E 3.4 min, 32 SFT steps x 10 s 5.3 min, L 0.5: 9.2 x 3 = 28 min; n 96 per checkpoint
    'learning_curve': {'steps': '0,8,16,32', 'n_train': 32, 'n_eval': 32},
    # 2 datasets x 3 k x 24 code episodes, harness-only with sandboxed tests x 2: 288 E 7.6 min, L 1: 8.6 x 3 = 26 min;
    # n 72 per dataset and k (formal needs a Lean toolchain: unavailable here, reported so)
    'harness_limits': {'episodes': 24},
}}

def scaled_params(scale:str|None, names, glob:dict, per:dict) -> dict:
    """`per` (notebook -> its own parameters) with the preset of `scale` under it: a preset key is dropped where the
    command line gives the same name, for every notebook (`-p NAME`) or this one (`-p NB.NAME`)."""
    if scale is None: return per
    if scale not in SCALES: raise SystemExit(f'--scale {str(scale)[:40]!r}: one of {", ".join(SCALES)}')
    out = {k: dict(v) for k, v in per.items()}
    for nb in names:
        preset = {k: v for k, v in SCALES[scale].get(nb, {}).items() if k not in glob and k not in per.get(nb, {})}
        if preset: out[nb] = preset | per.get(nb, {})
    return out

def check_out_root(out, run_id=None) -> Path:
    """`--out` (and `--run-id`, one folder name under it) refused in one line (a SystemExit) when it names no folder, is
    a file or lies under one, or cannot be made: checked before anything is written."""
    if str(out).strip() == '': raise SystemExit("--out '' names no folder (e.g. outputs/report)")
    if run_id is not None and (not re.fullmatch(r'[\w.+-]{1,100}', str(run_id)) or str(run_id) in ('.', '..')):
        raise SystemExit(f'--run-id {str(run_id)[:100]!r}: one folder name (letters, digits, . _ + -), not a path')
    p = Path(out)
    for q in [p, *p.parents]:
        if q.exists() and not q.is_dir():
            raise SystemExit(f'--out {p}: ' + ('a file, not a folder' if q == p else f'lies under {q}, a file'))
    try: p.mkdir(parents=True, exist_ok=True)
    except OSError as e: raise SystemExit(f'--out {p}: cannot be made ({e.strerror or type(e).__name__})') from None
    if not os.access(p, os.W_OK | os.X_OK): raise SystemExit(f'--out {p}: not writable')
    return p

def check_numbers(a) -> None:
    "The numeric arguments of tools/report.py, each finite and in its range (a one-line SystemExit else)."
    for name, v, lo, hi in [('--timeout', a.timeout, 0, 7 * 86400), ('--workers', a.workers, 1, 1024),
                            ('--num-cpus', a.num_cpus, 0, 1024), ('--num-gpus', a.num_gpus, 0, 64),
                            ('--slurm-time', a.slurm_time, 1, 7 * 24 * 60)]:
        if v is None: continue
        if not math.isfinite(v) or v < lo or v > hi or (name in ('--timeout', '--num-cpus') and v == 0):
            raise SystemExit(f'{name} {v}: must be a number ' + ('> ' if name in ('--timeout', '--num-cpus') else '>= ')
                             + f'{lo} and <= {hi}')

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
    for start in range(1, KERNEL_STARTS + 1):
        try:
            pm.execute_notebook(str(path), str(executed), parameters=dict(params, out_dir=str(out)), cwd=str(ROOT),
                                progress_bar=False, log_output=False, execution_timeout=timeout)
            rec.update(status='ok')
        except KeyboardInterrupt:
            rec.update(status='interrupted', error='KeyboardInterrupt: the run was stopped here',
                       seconds=round(time.time() - t0, 1))
            raise Interrupted(rec)
        except Exception as e:   # a failed notebook is reported, the others still run
            ename, evalue = getattr(e, 'ename', type(e).__name__), getattr(e, 'evalue', str(e))
            if _kernel_did_not_start(e, executed) and start < KERNEL_STARTS:
                rec['kernel_starts'] = start + 1
                print(f'WARNING: {path.stem}: the kernel died before running a cell ({evalue}); starting it again '
                      f'({start + 1} of {KERNEL_STARTS})', file=sys.stderr, flush=True)
                continue
            rec.update(status='failed', error=f'{ename}: {evalue}'.strip()[:2000],
                       cell=getattr(e, 'exec_count', None) or _stuck_cell(executed))
        break
    rec['seconds'] = round(time.time() - t0, 1)
    return rec

# Kernels started at the same moment by two cells can pick the same port (jupyter_client chooses free ports by binding
# and releasing them, per process); the loser dies before it answers. No cell has run then, so starting it again is
# safe; the record counts the starts (`kernel_starts`) and the log says so.
KERNEL_STARTS = 3

def _kernel_did_not_start(e:Exception, executed:Path) -> bool:
    "Whether `e` is a kernel that died in start-up, before papermill started any cell of `executed`."
    return 'before replying to kernel_info' in str(e) and _stuck_cell(executed) is None

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

def git_commit() -> str:
    "The short commit of HEAD, marked when tracked files have uncommitted changes; 'unknown' without git."
    try:
        head = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return head + (' (with uncommitted changes)' if dirty else '')
    except Exception: return 'unknown'

def fmt_n(sizes:dict) -> str:
    "The distinct sample sizes of `sample_sizes`, smallest first, as one cell of a table ('—' for none)."
    vals = sorted({v for vs in sizes.values() for v in vs}, key=lambda v: (len(v), v))
    return ', '.join(vals) if vals else '—'

WIRING = ("WIRING CHECK: model 'tiny' is a random, untrained model; this run tests that the code runs end to end. "
          "Its numbers say nothing about any method.")   # cove.experiment.WIRING_NOTE (tools/ imports no cove)

def wiring(rec:dict) -> bool:
    "Whether a notebook ran on the tiny random model (a wiring check, not a result)."
    return rec.get('params', {}).get('model') == 'tiny'

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
