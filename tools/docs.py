#!/usr/bin/env python3
"""Build the documentation site offline: `make docs` runs this (Sphinx + myst-nb, config in docs/conf.py).

The site (OUT/html/) mirrors the repository: nbs/index.ipynb is its front page (index.html), docs/*.md under docs/, the
notebooks under nbs/ (with nbs/index.html listing them), the API reference (from cove's docstrings) under api/, so
the links the pages already hold (`docs/demo.md`, `../nbs/04b_sandbox.ipynb`) resolve as they do on GitHub.
Notebooks are shown with their saved outputs and never executed. Nothing in the source tree is written: the sources
are copied into `OUT/_stage/` (notebooks without their `#| hide` cells and `#|` directive lines), then built.

usage: tools/docs.py [OUT]     build into OUT (default _site/)
"""
import json, re, shutil, subprocess, sys, time
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

def _notebook(src: Path, links=()) -> str:
    "Notebook `src` without its `#| hide` cells and `#|` directive lines; `links` are (old, new) for its markdown."
    nb = json.loads(src.read_text())
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

def _toctree(entries, hidden=True) -> str:
    return '```{toctree}\n' + (':hidden:\n' if hidden else '') + ':maxdepth: 1\n\n' + '\n'.join(entries) + '\n```\n'

def _notebooks_page(nbs) -> str:
    "nbs/index.md: every notebook the site shows, by kind, with its title."
    groups = {'Component notebooks': [n for n in nbs if n.parent == Path('nbs')],
              'Experiment notebooks': [n for n in nbs if n.parent.name == 'experiments'],
              'Tutorials': [n for n in nbs if n.parent.name == 'tutorials']}
    lines = ['# The notebooks', '', 'Each with its saved outputs; [the API reference](../api/index.md) lists what they export.']
    for g, ns in groups.items():
        lines += ['', f'## {g}', ''] + [f'- [{n.stem}]({n.relative_to("nbs")}): {title(ROOT/n)}' for n in ns]
    return '\n'.join(lines) + '\n\n' + _toctree([str(n.relative_to('nbs').with_suffix('')) for n in nbs])

def stage(stage_dir: Path) -> Path:
    "Lay the site's sources out in `stage_dir` as the repository has them, plus the pages that list them."
    written, nbs, mods = set(), notebooks(), modules()
    front = json.loads(_notebook(ROOT/'nbs/index.ipynb', links=[('](nbs/)', '](nbs/index.md)')]))
    topics = [f'docs/{p.stem}' for p in sorted((ROOT/'docs').glob('*.md'))]
    front['cells'].append({'cell_type': 'markdown', 'id': 'site-toctree', 'metadata': {},
                           'source': _toctree(topics + ['nbs/index', 'api/index'])})   # the sidebar's contents
    _write(stage_dir/'index.ipynb', json.dumps(front), written)
    for nb in nbs: _write(stage_dir/nb, _notebook(ROOT/nb), written)
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
    if len(argv) > 1 or argv and argv[0].startswith('-'):
        print(__doc__.split('usage:')[1].rstrip(), file=sys.stderr)
        return 2
    t = time.time()
    index = build(Path(argv[0]) if argv else SITE)
    print(f'the documentation site: {index} ({time.time() - t:.0f} s); open it in a browser (file://{index})')
    return 0

if __name__ == '__main__': sys.exit(main())
