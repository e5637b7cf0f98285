#!/usr/bin/env python3
"""Split `#| export` cells that hold several top-level definitions into one cell per definition (issue 44).

The house style (STYLE.md) is one idea per cell: a small `#| export` cell per function or class, as in fastcore. This
rewrites a notebook in place so that each `#| export` (or `#|export`, `#| export MODULE`) code cell holding two or more
top-level `def`/`async def`/`class` statements (decorated ones included: `@patch`, `@contextlib.contextmanager`, ...)
becomes one cell per definition:

- every piece starts with the original cell's directive line (cells with further `#|` directive lines are left alone);
- comments and blank lines right above a definition go with it; module-level statements (constants, `_log = ...`,
  imports) go with the definition right after them, or with the one before them when they come last;
- each piece is stripped of leading and trailing blank lines; the exported code, in order, is unchanged;
- the first piece stays in the original cell (same id); the others are new code cells inserted right after it, with
  fresh 8-hex-digit ids, `metadata` `{}`, no outputs and a null `execution_count`.

With `--constants N`, a single-definition `#| export` cell over 450 characters whose module-level statements all come
before the definition and take N or more characters (a data table, a prompt, a set of `declare_key` calls) is split
into a cell of those statements and a cell of the definition (the comments right above it stay with it).

A cell is skipped (and counted) when it does not parse, has a top-level statement other than a definition, an
assignment, an expression or an import (`if`, `for`, `try`, ...), imports from `__future__`, or when a top-level
non-definition statement uses a name that an earlier definition of the same cell defines (`X = f()` after `def f`).

usage:
  python3 tools/split_cells.py [--dry-run] [--constants N] NB.ipynb ...    split the cells; prints what it did
Then run `nbdev-clean --fname NB` on the changed notebooks and `nbdev-export`; `cove/*.py` changes only in its
`# %%` marker lines (check with `ast.dump`).
"""
import ast, json, random, re, sys
from collections import Counter
from pathlib import Path

DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Import, ast.ImportFrom)
EXPORT_RE = re.compile(r'#\|\s*export\b')

def lines(text:str) -> list[str]:
    "nbformat's list-of-lines form of a cell source (no trailing newline on the last line)."
    ls = text.splitlines(keepends=True)
    if ls and ls[-1].endswith('\n'): ls[-1] = ls[-1][:-1]
    return ls

def strip_blank(ls:list[str]) -> list[str]:
    "`ls` without its leading and trailing blank lines."
    a, b = 0, len(ls)
    while a < b and not ls[a].strip(): a += 1
    while b > a and not ls[b-1].strip(): b -= 1
    return ls[a:b]

def start(node) -> int:
    "First line (1-based) of `node`, its decorators included."
    return min([node.lineno] + [d.lineno for d in getattr(node, 'decorator_list', [])])

def defined_names(node) -> set[str]:
    return {node.name} if isinstance(node, DEFS) else set()

def used_names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

def plan(src:str) -> tuple[str, list[str]|None]:
    "(`'split'`, pieces) for a cell to split, else (why not, None); `why` is '' when the cell has under 2 definitions."
    ls = src.splitlines(keepends=True)
    if not ls or not EXPORT_RE.match(ls[0].strip()): return 'not export', None
    hdr, body = ls[0].rstrip('\n'), ls[1:]
    if any(l.lstrip().startswith('#|') for l in body): return 'other directives', None
    try: tree = ast.parse(src)
    except SyntaxError: return 'syntax error', None
    defs = [n for n in tree.body if isinstance(n, DEFS)]
    if len(defs) < 2: return '', None
    if any(not isinstance(n, DEFS + SIMPLE) for n in tree.body): return 'compound statement', None
    if any(isinstance(n, ast.ImportFrom) and n.module == '__future__' for n in tree.body): return '__future__', None
    seen = set()
    for n in tree.body:
        if isinstance(n, DEFS): seen |= defined_names(n)
        elif used_names(n) & seen: return 'definition used at module level', None
    # groups: the statements before each definition go with it; the statements after the last one go with the last
    groups, cur = [], []
    for n in tree.body:
        cur.append(n)
        if isinstance(n, DEFS): groups.append(cur); cur = []
    groups[-1] += cur
    # cut above each group's first statement, moving up over unindented comments and blank lines, never into the
    # previous group (an indented comment after a body's last statement stays with that body)
    src_ls = ls   # line k (1-based) is src_ls[k-1]
    cuts = []
    for prev, g in zip(groups, groups[1:]):
        lo, k = prev[-1].end_lineno, start(g[0]) - 1   # k: 0-based index of the group's first line
        while k - 1 >= lo and (not src_ls[k-1].strip() or src_ls[k-1].startswith('#')): k -= 1
        cuts.append(k)
    bounds = [1] + cuts + [len(src_ls)]   # first piece starts after the directive line
    pieces = []
    for a, b in zip(bounds, bounds[1:]):
        chunk = strip_blank(src_ls[a:b])
        pieces.append(hdr + '\n' + ''.join(chunk).rstrip('\n'))
    # the code must read the same, in the same order
    joined = '\n'.join(p.split('\n', 1)[1] for p in pieces)
    if ast.dump(ast.parse(joined)) != ast.dump(tree): raise AssertionError(f"split changed the code:\n{src}")
    return 'split', pieces

def plan_constants(src:str, min_chars:int) -> list[str]|None:
    "[statements, definition] for a long single-definition cell led by `min_chars`+ of module-level statements."
    ls = src.splitlines(keepends=True)
    if len(src) <= 450 or not ls or not EXPORT_RE.match(ls[0].strip()): return None
    if any(l.lstrip().startswith('#|') for l in ls[1:]): return None
    try: tree = ast.parse(src)
    except SyntaxError: return None
    body = tree.body
    if len(body) < 2 or not isinstance(body[-1], DEFS) or any(not isinstance(n, SIMPLE) for n in body[:-1]): return None
    if any(isinstance(n, ast.ImportFrom) and n.module == '__future__' for n in body): return None
    if sum(len(''.join(ls[n.lineno-1:n.end_lineno])) for n in body[:-1]) < min_chars: return None
    lo, k = body[-2].end_lineno, start(body[-1]) - 1
    while k - 1 >= lo and (not ls[k-1].strip() or ls[k-1].startswith('#')): k -= 1
    hdr = ls[0].rstrip('\n')
    pieces = [hdr + '\n' + ''.join(strip_blank(ls[a:b])).rstrip('\n') for a, b in ((1, k), (k, len(ls)))]
    joined = '\n'.join(p.split('\n', 1)[1] for p in pieces)
    if ast.dump(ast.parse(joined)) != ast.dump(tree): raise AssertionError(f"split changed the code:\n{src}")
    return pieces

def new_id(ids:set) -> str:
    while True:
        i = '%08x' % random.getrandbits(32)
        if i not in ids: ids.add(i); return i

def split_nb(path, dry:bool=False, constants:int=0) -> Counter:
    "Split the multi-definition export cells of notebook `path` in place; returns counts of what was done."
    nb = json.loads(Path(path).read_text())
    ids = {c.get('id') for c in nb['cells']}
    out, counts = [], Counter()
    for c in nb['cells']:
        out.append(c)
        if c['cell_type'] != 'code': continue
        why, pieces = plan(''.join(c['source']))
        if pieces is None and constants:
            pieces = plan_constants(''.join(c['source']), constants)
            if pieces: counts['constants split'] += 1; counts['new cells'] += 1; why = 'split'
        elif pieces: counts['split'] += 1; counts['new cells'] += len(pieces) - 1
        if pieces is None:
            if why and why != 'not export': counts['skipped: ' + why] += 1; print(f"  skip {c['id']}: {why}")
            continue
        c['source'] = lines(pieces[0])
        for p in pieces[1:]:
            out.append(dict(cell_type='code', execution_count=None, id=new_id(ids), metadata={}, outputs=[],
                            source=lines(p)))
    nb['cells'] = out
    if counts['new cells'] and not dry:
        Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    return counts

if __name__ == '__main__':
    args = sys.argv[1:]
    dry = '--dry-run' in args
    constants = int(args[args.index('--constants') + 1]) if '--constants' in args else 0
    nbs = [a for i, a in enumerate(args) if a.endswith('.ipynb')]
    total = Counter()
    for p in nbs:
        cs = split_nb(p, dry, constants)
        if cs: print(p, dict(cs))
        total += cs
    print('total', dict(total))
