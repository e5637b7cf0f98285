#!/usr/bin/env python3
"""Build the documentation site offline: `make docs` runs this (Sphinx + myst-nb, config in docs/conf.py).

The site (OUT/html/) mirrors the repository: nbs/index.ipynb is its front page (index.html), docs/*.md under docs/, the
notebooks under nbs/ (with nbs/index.html listing them), the API reference (from cove's docstrings) under api/, so
the links the pages already hold (`docs/demo.md`, `../nbs/04b_sandbox.ipynb`) resolve as they do on GitHub.
Notebooks are shown with their saved outputs and never executed. Nothing in the source tree is written: the sources
are copied into `OUT/_stage/` (notebooks without their `#| hide` cells and `#|` directive lines), then built.

The sidebar is a reading order: the front page, the tutorial, the paper's sections (the component notebooks in number
order), the experiments, then the reference (docs/*.md, all notebooks, the API); each page links its previous and next.
The experiment notebooks are saved without outputs, so each experiment page gets a "Latest recorded run" section after
its introduction: its result at CPU scale where docs/experiments.md has a section "`name` at CPU scale", then its row of the smoke report in docs/experiments.md (date, model, dtype, machine), the figures
docs/experiments.md records for it, and, where it records none, the figures of a wiring run on the tiny random model
kept in docs/figures/ (`--record-wiring` makes them: each is dated, with its CPU, dtype and parameters, in
docs/figures/wiring.json, and marked on the page as saying nothing about any method).

usage: tools/docs.py [OUT]                       build into OUT (default _site/)
       tools/docs.py --record-wiring [NAME ...]  run these experiment notebooks (default: all in WIRING_RUNS) on the tiny
                                                 model, keep their figures in docs/figures/ (a few minutes on 2 cores)
"""
import json, os, posixpath, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT/'_site'

def _text(s) -> str: return ''.join(s) if isinstance(s, list) else s

def notebooks(root: Path = ROOT) -> list:
    "The notebooks the site shows, as paths relative to `root`: component, experiment and tutorial notebooks."
    nbs = root/'nbs'
    return [p.relative_to(root) for p in sorted(nbs.glob('[0-9]*.ipynb')) + sorted((nbs/'experiments').glob('*.ipynb'))
            + sorted((nbs/'tutorials').glob('*.ipynb'))]

def page_of(src) -> str:
    "The site path of source file `src` (relative to the repository): `nbs/index.ipynb` is the front page."
    src = Path(src)
    return 'index.html' if src == Path('nbs/index.ipynb') else str(src.with_suffix('.html'))

def modules() -> list:
    "cove's public modules, by name, found from its files (nothing is imported)."
    pkg = ROOT/'cove'
    return sorted('.'.join(p.relative_to(ROOT).with_suffix('').parts) for p in pkg.rglob('*.py')
                  if not p.name.startswith('_') and '__pycache__' not in p.parts)

def _is_hidden(cell) -> bool:
    return any(l.replace(' ', '') == '#|hide' for l in _text(cell['source']).splitlines())

def _write(path: Path, text: str, written: set):
    "Write `text` to `path` unless it holds it already, so that a rebuild redoes only the pages whose source changed."
    written.add(path)
    if path.exists() and path.read_text() == text: return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)

def _notebook(src: Path, links=(), after_intro=()) -> str:
    """Notebook `src` without its `#| hide` cells and `#|` directive lines; `links` are (old, new) for its markdown;
    `after_intro`: markdown cells to put after its first cell (its title and introduction)."""
    nb = json.loads(src.read_text())
    nb['cells'][1:1] = list(after_intro)
    cells = []
    for c in nb['cells']:
        if c['cell_type'] == 'code':
            if _is_hidden(c): continue
            c['source'] = '\n'.join(l for l in _text(c['source']).splitlines() if not l.startswith('#|')).strip('\n')
            if not c['source'] and not c.get('outputs'): continue
        elif c['cell_type'] == 'markdown':
            c['source'] = _text(c['source'])
            for old, new in links: c['source'] = c['source'].replace(old, new)
        cells.append(c)
    return json.dumps({**nb, 'cells': cells})

def title(src: Path) -> str:
    "A notebook's title: its first markdown heading."
    for c in json.loads(Path(src).read_text())['cells']:
        m = re.match(r'#\s+(.+)', _text(c['source'])) if c['cell_type'] == 'markdown' else None
        if m: return m.group(1).strip()
    return Path(src).stem

def _toctree(entries, hidden=True, caption=None) -> str:
    return ('```{toctree}\n' + (':hidden:\n' if hidden else '') + (f':caption: {caption}\n' if caption else '')
            + ':maxdepth: 1\n\n' + '\n'.join(entries) + '\n```\n')

def reading_order(root: Path = ROOT) -> dict:
    "The sidebar's sections, in order, each with its documents (site paths without suffix); the front page comes first."
    nbs = notebooks(root)
    doc = lambda n: str(n.with_suffix(''))
    return {'Tutorial': [doc(n) for n in nbs if n.parent.name == 'tutorials'],
            "The paper, section by section": [doc(n) for n in nbs if n.parent == Path('nbs')],
            'Experiments': [doc(n) for n in nbs if n.parent.name == 'experiments'],
            'Reference': [f'docs/{p.stem}' for p in sorted((root/'docs').glob('*.md'))] + ['nbs/index', 'api/index']}

def _notebooks_page(nbs) -> str:
    "nbs/index.md: every notebook the site shows, by kind, with its title (the sidebar holds them in reading order)."
    groups = {'Tutorials': [n for n in nbs if n.parent.name == 'tutorials'],
              'Component notebooks': [n for n in nbs if n.parent == Path('nbs')],
              'Experiment notebooks': [n for n in nbs if n.parent.name == 'experiments']}
    lines = ['# The notebooks', '', 'Each with its saved outputs; [the API reference](../api/index.md) lists what they export.']
    for g, ns in groups.items():
        lines += ['', f'## {g}', ''] + [f'- [{n.stem}]({n.relative_to("nbs")}): {title(ROOT/n)}' for n in ns]
    return '\n'.join(lines) + '\n'

# The experiment pages' results: recorded runs from docs/experiments.md, else a kept wiring run on the tiny model
FIGURES = ROOT/'docs/figures'
WIRING = FIGURES/'wiring.json'
REPORT_ANCHOR = 'the-latest-report-every-notebook-at-its-smoke-defaults'
WIRING_RUNS = {   # the wiring parameters of tests/test_experiments*.py (each run under 2 min on 2 cores)
    'attention_shift': dict(n_train=2, max_steps=1, n_inputs=3, k=2),
    'calibration': dict(overrides={'model.max_new_tokens': 8}),
    'coevo_ablations': dict(families='math', episodes=2, val_episodes=1, test_episodes=1, budget={'coevo.phase_len': 1, 'coevo.k': 2},
                            overrides={'model.max_new_tokens': 8, 'model.batch_size': 4, 'memrl.summary_tokens': 8}),
    'evolver_ablations': dict(families='math', episodes=1, overrides={'model.max_new_tokens': 8, 'model.batch_size': 4, 'memrl.summary_tokens': 8},
                              budget={'evolver.max_turns': 1, 'evolver.train_every': 0, 'evolver.prune_every': 1, 'evolver.cold_start': False}),
    'harness_limits': dict(datasets='code:mbpp', ks='2,4', episodes=2, overrides={'model.max_new_tokens': 8}),
    'learning_curve': dict(steps='1,2', n_train=3, n_eval=2, lr='1e-3,5e-4', layers=0, overrides={'model.max_new_tokens': 8}),
    'memrl_epochs': dict(families='math', episodes=1, epochs=2, transfer_episodes=1, budget={},
                         overrides={'model.max_new_tokens': 8, 'model.batch_size': 4, 'memrl.summary_tokens': 8}),
    'router_pareto': dict(episodes=1, overrides={'model.max_new_tokens': 8, 'self_challenging.max_new_tokens': 48, 'evolver.max_turns': 1,
                                                 'evolver.train_every': 0, 'trigger.k': 1}),
    'table2_main': dict(episodes=1, overrides={'model.max_new_tokens': 8, 'self_challenging.max_new_tokens': 48, 'evolver.max_turns': 1,
                                               'evolver.train_every': 0, 'trigger.k': 1}),
    'trigger_timing': dict(episodes=2, arms='cove,always_on,harness_only,no_cold_start', variant='always_both', every=2,
                           overrides={'model.max_new_tokens': 8, 'trigger.k': 1, 'trigger.w': 1}),
}

def _sections(md: str, level: str) -> dict:
    "The sections of markdown `md` at heading `level` ('##', '###'): heading text -> body (to the next heading of that level or above)."
    parts = re.split(rf'^(#{{1,{len(level)}}} .+)$', md, flags=re.M)
    return {h.lstrip('#').strip(): b for h, b in zip(parts[1::2], parts[2::2]) if h.startswith(level + ' ')}

def _rebase(md: str, page: str, src_dir: str = 'docs') -> str:
    "Markdown `md` written in `src_dir` (docs/experiments.md) with its relative links and images made relative to site page `page`."
    def fix(m):
        url = m.group(2)
        if re.match(r'[a-z]+:|//', url): return m.group(0)
        path, _, frag = url.partition('#')
        target = posixpath.normpath(posixpath.join(src_dir, path or 'experiments.md'))
        target = 'index.ipynb' if target == 'README.md' else target
        return f'{m.group(1)}({posixpath.relpath(target, posixpath.dirname(page))}{"#" + frag if frag else ""})'
    return re.sub(r'(!?\[[^\]]*\])\(([^)\s]+)\)', fix, md)

def smoke_report(path: Path = ROOT/'docs/experiments.md') -> dict:
    """docs/experiments.md's latest smoke report: its `date`, `model`, `dtype`, `machine`, the table's `columns` and
    `rows` (experiment -> its cells), and `figures` (experiment -> the markdown of the figures recorded for it: the
    images of each `###` section naming it, and the paragraph after them, which says how they were made)."""
    md = path.read_text()
    secs = _sections(md, '##')
    sec = next((b for h, b in secs.items() if h.startswith('The latest report')), None)
    flat = ' '.join((sec or '').split())
    run = re.search(r'on the ([\w -]*machine) \((\d{4}-\d\d-\d\d), ([^,()]+), ([^()]*)\)', flat)
    dtype = run and re.search(r'\b(fp32|bf16|fp16)\b', run.group(4))
    if not dtype: raise ValueError(f'{path}: no "The latest report" section saying "on the ... machine (date, model, dtype, ...)"')
    rest = [x.strip() for x in run.group(4).split(',') if x.strip() != dtype.group(1)]
    table = [l for l in sec.splitlines() if l.startswith('|')]
    cells = lambda l: [c.strip() for c in l.strip().strip('|').split(' | ')]
    rows = {re.sub(r'`', '', cells(l)[0]): cells(l)[1:] for l in table[2:]}
    figures = {}
    for h, body in _sections(md, '###').items():
        if h.endswith('at CPU scale'): continue   # a CPU-scale result (`cpu_scale_runs`), not the smoke report's
        names = set(re.findall(r'`(\w+)`', h)) & set(rows)
        paras = [p.strip() for p in re.split(r'\n\s*\n', body) if p.strip()]
        imgs = [i for i, p in enumerate(paras) if p.startswith('![')]
        for n in names:
            if imgs: figures[n] = '\n\n'.join(paras[imgs[0]:imgs[-1] + 2])
    return dict(machine=run.group(1), date=run.group(2), model=run.group(3), dtype=dtype.group(1), settings=', '.join(rest),
                cpu_named=bool(re.search(r'\b(AMD|EPYC|Intel|Xeon|Ryzen|Graviton|Apple M\d)\b', sec.split('\n|')[0])),   # before its table
                columns=cells(table[0])[1:], rows=rows, figures=figures)

def _wiring() -> dict: return json.loads(WIRING.read_text()) if WIRING.exists() else {}

def cpu_scale_runs(path: Path = ROOT/'docs/experiments.md') -> dict:
    """docs/experiments.md's results at CPU scale (`make experiments-cpu`, three seeds): experiment -> the markdown of
    its section headed "`name` at CPU scale"."""
    secs = _sections(path.read_text(), '###')
    return {m.group(1): body.strip() for h, body in secs.items() if (m := re.fullmatch(r'`(\w+)` at CPU scale', h))}

def recorded_run(name: str, report: dict | None = None, wiring: dict | None = None, cpu: dict | None = None) -> dict:
    """The markdown cell of experiment `name`'s page that shows its latest recorded run (see the module's docstring):
    its result at CPU scale first, where docs/experiments.md has one, then its smoke report row and figures."""
    report, wiring = report or smoke_report(), _wiring() if wiring is None else wiring
    cpu = cpu_scale_runs() if cpu is None else cpu
    page, r = f'nbs/experiments/{name}.html', report
    settings, cpu_named = f' ({r["settings"]})' if r['settings'] else '', '' if r['cpu_named'] else ' (the report names no CPU model)'
    lines = ['## Latest recorded run', '']
    if name in cpu:
        lines += [f'This page shows the notebook as saved, without outputs. Its latest recorded run is at **CPU scale**, '
                  f'three seeds pooled ([docs/experiments.md](../../docs/experiments.md#{name}-at-cpu-scale)):', '',
                  _rebase(cpu[name], page), '', '### At its smoke defaults', '']
    if name not in cpu:
        lines += [f'It has **no result at CPU scale** yet: `make experiments-cpu ONLY={name}` makes one (three seeds); '
                  f'[docs/experiments.md](../../docs/experiments.md#at-cpu-scale-make-experiments-cpu) says what has '
                  'run so far and what it costs. The figures below are a smoke run\'s, not a result.', '']
    lines += [f'{"The" if name in cpu else "This page shows the notebook as saved, without outputs. Its"} latest smoke '
              f'run is the smoke report of **{r["date"]}** ([docs/experiments.md](../../docs/experiments.md#{REPORT_ANCHOR})): '
              f'`make experiments` at every notebook\'s smoke defaults, **{r["model"]}** in **{r["dtype"]}**{settings}, on the '
              f'{r["machine"]}{cpu_named}.', '']
    row = r['rows'].get(name)
    if row: lines += [f'- **{c}**: {_rebase(v, page)}' for c, v in zip(r['columns'], row)] + ['']
    else: lines += [f'The smoke report has no row for `{name}`.', '']
    if name in r['figures']:
        lines += ['### The figures recorded for it', '', _rebase(r['figures'][name], page), '']
    elif name in wiring:
        w = wiring[name]
        load = f' (load average {w["load"]})' if 'load' in w else ''
        lines += [f'### A wiring run\'s {"figures" if len(w["figures"]) > 1 else "figure"} (not a result)', '',
                  f'No figure of a run on a real model is kept in the repository for `{name}`. The '
                  f'{"figures below come" if len(w["figures"]) > 1 else "figure below comes"} '
                  f'from this notebook run on the **tiny random model** (a wiring check: it shows what the notebook draws; '
                  f'**its numbers say nothing about any method**), run **{w["date"]}** on {w["cpu"]}, {w["dtype"]}, '
                  f'commit `{w["commit"]}`{" (with uncommitted changes to cove/ or nbs/)" if w.get("uncommitted") else ""}, '
                  f'{w["seconds"]:.0f} s of papermill{load}, with the parameters '
                  f'`{json.dumps(w["parameters"])}` (`tools/docs.py --record-wiring {name}` runs it again).', '']
        lines += [l for f in w['figures'] for l in (f'![{name}, wiring run on the tiny random model, {w["date"]}: {f}](../../docs/figures/{f})', '')]
    else:
        lines += [f'**No figure of `{name}` is recorded in the repository**: neither docs/experiments.md nor docs/figures/ '
                  f'holds one.', '']
    return {'cell_type': 'markdown', 'id': 'latest-recorded-run', 'metadata': {}, 'source': '\n'.join(lines)}

def record_wiring(names=None, figures: Path = FIGURES) -> dict:
    """Run experiment notebooks `names` (default: every one in WIRING_RUNS) under papermill on the tiny random model
    with their WIRING_RUNS parameters, keep their PNGs as `figures/wiring_<name>_<png>` and the runs' date, CPU, dtype,
    commit, seconds and parameters in `figures/wiring.json`; the updated record."""
    import papermill as pm
    names = list(names or WIRING_RUNS)
    unknown = [n for n in names if n not in WIRING_RUNS]
    if unknown: raise SystemExit(f'no wiring parameters for {unknown}: WIRING_RUNS has {sorted(WIRING_RUNS)}')
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    info = Path('/proc/cpuinfo').read_text().splitlines() if Path('/proc/cpuinfo').exists() else []
    cpu = next((l.split(':', 1)[1].strip() for l in info if l.startswith('model name')), 'unknown CPU')
    git = lambda *a: subprocess.run(['git', *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit, dirty = git('rev-parse', '--short', 'HEAD'), bool(git('status', '--porcelain', 'cove', 'nbs'))
    record = json.loads((figures/'wiring.json').read_text()) if (figures/'wiring.json').exists() else {}
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            out, t = Path(tmp)/'run', time.time()
            pm.execute_notebook(str(ROOT/f'nbs/experiments/{name}.ipynb'), str(Path(tmp)/'executed.ipynb'), cwd=str(ROOT),
                                progress_bar=False, parameters=dict(model='tiny', out_dir=str(out), **WIRING_RUNS[name]))
            seconds, load = time.time() - t, os.getloadavg()[0]
            printed = json.dumps(json.loads((Path(tmp)/'executed.ipynb').read_text())['cells'])
            dtype = re.search(r'dtype=torch\.(\w+)', printed)
            for old in figures.glob(f'wiring_{name}_*.png'): old.unlink()
            kept = []
            for png in sorted(p for p in out.rglob('*.png') if 'adapters' not in p.parts):
                kept.append(f'wiring_{name}_{"_".join(png.relative_to(out).parts)}')
                shutil.copy2(png, figures/kept[-1])
        record[name] = dict(date=time.strftime('%Y-%m-%d'), cpu=f'{cpu} ({os.cpu_count()} cores)',
                            dtype=dtype.group(1) if dtype else 'dtype not printed', commit=commit, uncommitted=dirty,
                            seconds=round(seconds, 1), load=round(load, 1), parameters=WIRING_RUNS[name], figures=kept)
        print(f'{name}: {seconds:.0f} s, {kept}', flush=True)
        (figures/'wiring.json').write_text(json.dumps(dict(sorted(record.items())), indent=1) + '\n')
    return record


def stage(stage_dir: Path) -> Path:
    "Lay the site's sources out in `stage_dir` as the repository has them, plus the pages that list them."
    written, nbs, mods = set(), notebooks(), modules()
    front = json.loads(_notebook(ROOT/'nbs/index.ipynb', links=[('](nbs/)', '](nbs/index.md)')]))
    front['cells'].append({'cell_type': 'markdown', 'id': 'site-toctree', 'metadata': {},   # the sidebar's contents
                           'source': '\n'.join(_toctree(e, caption=c) for c, e in reading_order().items())})
    _write(stage_dir/'index.ipynb', json.dumps(front), written)
    report, cpu = smoke_report(), cpu_scale_runs()
    for nb in nbs:
        extra = [recorded_run(nb.stem, report, cpu=cpu)] if nb.parent.name == 'experiments' else []
        _write(stage_dir/nb, _notebook(ROOT/nb, after_intro=extra), written)
    for md in sorted((ROOT/'docs').glob('*.md')):   # README.md is the front page here
        _write(stage_dir/'docs'/md.name, md.read_text().replace('](../README.md', '](../index.ipynb'), written)
    for fig in sorted((ROOT/'docs/figures').glob('*')):
        dst = stage_dir/'docs/figures'/fig.name
        written.add(dst)
        if not dst.exists() or dst.read_bytes() != fig.read_bytes():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(fig, dst)
    _write(stage_dir/'nbs/index.md', _notebooks_page(nbs), written)
    _write(stage_dir/'api/index.md', '# API reference\n\nFrom the docstrings of the `cove` package, module by module.\n\n'
           + _toctree(mods, hidden=False), written)
    for m in mods: _write(stage_dir/'api'/f'{m}.rst', f'{m}\n{"=" * len(m)}\n\n.. automodule:: {m}\n   :members:\n', written)
    for p in stage_dir.rglob('*'):   # a source removed since the last build
        if p.is_file() and p not in written: p.unlink()
    return stage_dir

def build(out: Path = SITE, quiet: bool = True) -> Path:
    "Build the site into `out/html`; the sources are staged in `out/_stage`, Sphinx's and myst-nb's files beside. Its front page."
    out = Path(out).resolve()
    src = stage(out/'_stage')
    cmd = [sys.executable, '-m', 'sphinx', '-b', 'html', '-c', str(ROOT/'docs'), '-d', str(out/'.doctrees'),
           *(['-q'] if quiet else []), str(src), str(out/'html')]   # myst-nb writes html/../jupyter_execute
    subprocess.run(cmd, check=True, cwd=out)
    return out/'html'/'index.html'

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['--record-wiring']:
        record_wiring(argv[1:])
        return 0
    if len(argv) > 1 or argv and argv[0].startswith('-'):
        print(__doc__.split('usage:')[1].rstrip(), file=sys.stderr)
        return 2
    t = time.time()
    index = build(Path(argv[0]) if argv else SITE)
    print(f'the documentation site: {index} ({time.time() - t:.0f} s); open it in a browser (file://{index})')
    return 0

if __name__ == '__main__': sys.exit(main())
