#!/usr/bin/env python3
"""Edit notebook cells in place, keeping every other cell's id, and check that unchanged cells kept theirs.

nbdev writes each cell's id into the `# %% ...#id` marker lines of `cove/*.py`, so a notebook rewritten from scratch
renumbers every cell and turns every diff of `cove/` into noise. Edit with JupyterLab, with this script, or with
`nbformat`; never regenerate a notebook.

usage:
  tools/nbcells.py ls NB                        cells: id, type, first line
  tools/nbcells.py cat NB ID                    a cell's source
  tools/nbcells.py set NB ID FILE               replace cell ID's source with FILE ('-' = stdin)
  tools/nbcells.py sub NB OLD_FILE NEW_FILE     replace the text of OLD_FILE by NEW_FILE's, in the one cell holding it
  tools/nbcells.py add NB AFTER_ID TYPE FILE    insert a code|markdown cell after AFTER_ID ('^' = first); prints its id
  tools/nbcells.py rm NB ID                     delete a cell
  tools/nbcells.py outputs NB [MAX_LINES]       execute NB as nbdev-test does and save the small, deterministic outputs
                                                (stdout, displays, figures) of its cells; drops stderr, outputs over
                                                MAX_LINES (default 25) and anything with an address or a timing in it
  tools/nbcells.py check [REV]                  fail if a notebook cell whose source is unchanged since REV (default
                                                HEAD~1) now has another id; compares the working tree
"""
import json, re, subprocess, sys, uuid
from pathlib import Path

def load(p) -> dict: return json.loads(Path(p).read_text())

def save(p, nb:dict):
    Path(p).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')

def lines(text:str) -> list[str]:
    "nbformat's list-of-lines form of a cell source (no trailing newline on the last line)."
    ls = text.splitlines(keepends=True)
    if ls and ls[-1].endswith('\n'): ls[-1] = ls[-1][:-1]
    return ls

def source(c:dict) -> str: return ''.join(c['source'])

def find(nb:dict, cid:str) -> int:
    for k, c in enumerate(nb['cells']):
        if c['id'] == cid: return k
    raise SystemExit(f'no cell {cid}')

def sub(path, old:str, new:str) -> str:
    "Replace `old` by `new` in the single cell whose source contains `old` exactly once; returns the cell's id."
    nb = load(path)
    hits = [c for c in nb['cells'] if old in source(c)]
    if len(hits) != 1: raise SystemExit(f"{path}: {len(hits)} cells contain {old[:60]!r}")
    s = source(hits[0])
    if s.count(old) != 1: raise SystemExit(f"{path}: {s.count(old)} occurrences of {old[:60]!r} in cell {hits[0]['id']}")
    hits[0]['source'] = lines(s.replace(old, new)); save(path, nb)
    return hits[0]['id']

def add(path, after:str, typ:str, text:str) -> str:
    "Insert a new `code` or `markdown` cell after cell `after` ('^' = at the start); returns its new id."
    if typ not in ('code', 'markdown'): raise SystemExit(f"type must be code or markdown, not {typ!r}")
    nb = load(path); ids = {c['id'] for c in nb['cells']}
    nid = next(i for i in iter(lambda: uuid.uuid4().hex[:8], None) if i not in ids)
    c = dict(cell_type=typ, id=nid, metadata={}, source=lines(text))
    if typ == 'code': c = dict(cell_type='code', execution_count=None, id=nid, metadata={}, outputs=[], source=c['source'])
    nb['cells'].insert(0 if after == '^' else find(nb, after) + 1, c); save(path, nb)
    return nid

def renumbered(old:dict, new:dict) -> list[tuple[str, str, str]]:
    "`(old id, new id, first line)` of each cell of `new` whose source is a unique unchanged cell of `old` that lost its id."
    by_src = {}
    for c in old['cells']: by_src.setdefault(source(c), []).append(c['id'])
    new_ids = {c['id'] for c in new['cells']}
    out = []
    for c in new['cells']:
        was = by_src.get(source(c), [])
        if len(was) == 1 and c['id'] != was[0] and was[0] not in new_ids:
            out.append((was[0], c['id'], (source(c).splitlines() or [''])[0][:70]))
    return out

def check(rev:str='HEAD~1', root:Path=Path('.')) -> int:
    "Number of renumbered cells over the notebooks changed since `rev` (printed); 0 means every unchanged cell kept its id."
    git = lambda *a: subprocess.run(['git', *a], cwd=root, capture_output=True, text=True, check=True).stdout
    changed = [p for p in git('diff', '--name-only', rev, '--', '*.ipynb').split() if (root/p).exists()]
    bad = 0
    for p in changed:
        try: old = json.loads(git('show', f'{rev}:{p}'))
        except subprocess.CalledProcessError: continue   # a new notebook
        for o, n, first in renumbered(old, load(root/p)):
            print(f"{p}: unchanged cell {o} now has id {n}: {first!r}"); bad += 1
    return bad

NOISY = re.compile(r'0x[0-9a-f]{6,}|\d+(\.\d+)?\s?(ms|s|sec|secs|seconds)\b|it/s|s/it|\d{4}-\d\d-\d\dT?\s?\d\d:\d\d')

def keep(o:dict, max_lines:int=25) -> bool:
    "Whether output `o` is worth saving: small, deterministic, and not a warning on stderr."
    if o.get('output_type') == 'error' or (o.get('output_type') == 'stream' and o.get('name') == 'stderr'): return False
    data = o.get('data', {})
    if 'image/png' in data: return len(''.join(data['image/png'])) < 80_000
    text = ''.join(o.get('text', '') or data.get('text/markdown', '') or data.get('text/plain', ''))
    return bool(text.strip()) and text.count('\n') < max_lines and not NOISY.search(text)

def outputs(path, max_lines:int=25) -> int:
    "Execute notebook `path` the way `nbdev-test` does (its skip flags apply), then save each cell's kept outputs in place; returns the number of cells with outputs."
    import shutil, tempfile
    from nbdev.test import test_nb
    from nbdev.config import get_config
    path = Path(path).resolve()
    tmp = Path(tempfile.mkstemp(suffix='.ipynb', prefix=f'.{path.stem}-', dir=path.parent)[1])
    try:
        shutil.copy(path, tmp)
        cfg = get_config(path.parent)
        ok, secs = test_nb(tmp, skip_flags=cfg.tst_flags.split() if isinstance(cfg.tst_flags, str) else cfg.tst_flags, save=True,
                           basepath=cfg.config_path)
        if not ok: raise SystemExit(f"{path.name} failed; nothing saved")
        ran = {c['id']: c.get('outputs', []) for c in load(tmp)['cells']}
    finally: tmp.unlink(missing_ok=True)
    nb = load(path); n = 0
    for c in nb['cells']:
        if c['cell_type'] != 'code': continue
        src = source(c)
        hidden = src.startswith('#| hide') or '#| export' in src.split('\n', 1)[0]
        c['outputs'] = [] if hidden else [o for o in ran.get(c['id'], []) if keep(o, max_lines)]
        for o in c['outputs']:
            if 'execution_count' in o: o['execution_count'] = None
        n += bool(c['outputs'])
    save(path, nb)
    print(f"{path.name}: ran in {secs:.0f} s; outputs saved in {n} of {sum(c['cell_type'] == 'code' for c in nb['cells'])} code cells")
    return n

def main(argv:list[str]):
    if not argv or argv[0] in ('-h', '--help'): print(__doc__); return 0
    cmd, a = argv[0], argv[1:]
    if cmd == 'check':
        bad = check(a[0] if a else 'HEAD~1')
        print(f"{bad} renumbered cell(s)" if bad else "every unchanged cell kept its id"); return 1 if bad else 0
    nb = load(a[0])
    read = lambda f: sys.stdin.read() if f == '-' else Path(f).read_text()
    if cmd == 'ls':
        for c in nb['cells']: print(c['id'], c['cell_type'][:4], (source(c).splitlines() or [''])[0][:100])
    elif cmd == 'cat': print(source(nb['cells'][find(nb, a[1])]))
    elif cmd == 'set': nb['cells'][find(nb, a[1])]['source'] = lines(read(a[2])); save(a[0], nb)
    elif cmd == 'sub': print(sub(a[0], read(a[1]), read(a[2])))
    elif cmd == 'add': print(add(a[0], a[1], a[2], read(a[3])))
    elif cmd == 'outputs': outputs(a[0], int(a[1]) if len(a) > 1 else 25)
    elif cmd == 'rm': del nb['cells'][find(nb, a[1])]; save(a[0], nb)
    else: raise SystemExit(f"unknown command {cmd!r}\n{__doc__}")
    return 0

if __name__ == '__main__': sys.exit(main(sys.argv[1:]))
