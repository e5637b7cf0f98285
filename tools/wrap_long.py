#!/usr/bin/env python3
"""Rewrap the lines over 120 characters in example cells (non-exported code cells of `nbs/**/*.ipynb`) and in
`tests/*.py`, touching nothing else.

Only a line longer than the limit is rewritten, one step at a time until it fits or nothing more can be done:
- a comment line is rewrapped at words, with the same indentation and `#` prefix;
- a trailing comment that makes a line too long moves to its own line just above, at that line's indentation;
- code is broken after a comma (or before `and`/`or`/`if`/`else`/`for`/`+`) inside brackets, the outermost
  bracket first, the continuation aligned one past its opening bracket (or hanging, where the bracket ends its line):
  the house's fastcore-like layout, not black's one-argument-per-line;
- an assert's test, an assigned or returned value, or `from m import a, b` with nothing bracketed to break in
  gets parentheses first;
- a long string literal is split at a space (or after a `\\n`) into implicitly concatenated pieces.
Every edited cell or file must give the same `ast.dump` before and after (implicit concatenation parses to the same
constant); where it does not, or where the source does not parse (IPython magics), it is left as it was and listed.
Papermill `parameters` cells are left alone (papermill reads one-line assignments with trailing help comments).

usage:
  python3 tools/wrap_long.py [--dry-run] [PATH ...]     default: every notebook under nbs/ and tests/*.py
                                                       then run nbdev-clean
"""
import ast, io, json, re, sys, textwrap, tokenize
from glob import glob
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import nbcells

LIMIT = 120
EXPORT = re.compile(r'\s*#\|\s*export')
KEYWORDS = {'and', 'or', 'if', 'else', 'for'}
OPEN, CLOSE = '([{', ')]}'

def tokens(src:str) -> list:
    "Tokens of `src`, each with the stack of brackets (row, col) open before it."
    out, stack = [], []
    for t in tokenize.generate_tokens(io.StringIO(src).readline):
        if t.type == tokenize.OP and t.string in CLOSE and stack: stack.pop()
        out.append((t, tuple(stack)))
        if t.type == tokenize.OP and t.string in OPEN: stack.append(t.start)
    return out

def _indent(line:str) -> int: return len(line) - len(line.lstrip(' '))

def _cont_col(lines, toks, br) -> int:
    "Column where a continuation inside the bracket opened at `br` starts: one past it, or hanging if it ends its line."
    row, col = br
    after = [t for t, _ in toks if t.start[0] == row and t.start[1] > col and t.type not in (tokenize.NL, tokenize.COMMENT)]
    if after: return col + 1
    nxt = next((t for t, _ in toks if t.start > br and t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE)), None)
    return nxt.start[1] if nxt else _indent(lines[row - 1]) + 4

def _split(lines, r, col, cc) -> list:
    "Break line `r` (1-based) at `col`, the rest starting at column `cc`."
    l = lines[r - 1]
    return lines[:r - 1] + [l[:col].rstrip(), ' ' * cc + l[col:].lstrip()] + lines[r:]

def _bytecol(line:str, col:int) -> int: return len(line.encode()[:col].decode(errors='ignore'))

def fix_comment(lines, r, toks):
    l = lines[r - 1]
    row = [t for t, _ in toks if t.start[0] == r and t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)]
    if not row or row[-1].type != tokenize.COMMENT: return None
    c = row[-1]
    if c.end[1] <= LIMIT or re.match(r'#\s*(noqa|type:|pragma|\|)', c.string): return None
    if len(row) == 1:   # a comment line: rewrap at words
        m = re.match(r'(#+\s*)(.*)', c.string)
        prefix = ' ' * c.start[1] + (m.group(1) if m.group(1).strip() != m.group(1) else m.group(1) + ' ')
        ws = textwrap.wrap(m.group(2), width=LIMIT - len(prefix), break_long_words=False, break_on_hyphens=False)
        if len(ws) < 2: return None
        return lines[:r - 1] + [prefix + w for w in ws] + lines[r:]
    code_end = row[-2].end[1]
    first = next(t for t, _ in toks if t.end[0] >= r and t.type not in (tokenize.INDENT, tokenize.DEDENT))
    if code_end > LIMIT: return None                       # break the code first
    if first.start[0] != r or (r > 1 and lines[r - 2].endswith('\\')): return None   # inside a string or a continuation
    return lines[:r - 1] + [' ' * _indent(l) + c.string, l[:c.start[1]].rstrip()] + lines[r:]

def fix_break(lines, r, toks):
    "Break line `r` after a comma or before a keyword/`+`, inside brackets: outermost bracket first, then rightmost."
    l, cands = lines[r - 1], []
    row = [(t, st) for t, st in toks if t.start[0] == r]
    for k, (t, st) in enumerate(row):
        if not st: continue
        nxt = row[k + 1][0] if k + 1 < len(row) else None
        if t.type == tokenize.OP and t.string == ',':
            if nxt is None or nxt.type in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE) or nxt.string in CLOSE: continue
            col, first_len = t.end[1], t.end[1]
        elif (t.type == tokenize.NAME and t.string in KEYWORDS) or (t.type == tokenize.OP and t.string == '+'):
            if k == 0 or row[k - 1][0].type == tokenize.OP and row[k - 1][0].string in OPEN + ',': continue
            col, first_len = t.start[1], len(l[:t.start[1]].rstrip())
            if t.string in ('for', 'if') and (st[-1][0] != r or col - st[-1][1] < 30): continue   # `[x for ...` stays
        else: continue
        cc = _cont_col(lines, toks, st[-1])
        rest = len(l) - col + cc - (len(l[col:]) - len(l[col:].lstrip()))
        if first_len > LIMIT or cc >= col or first_len < cc + 8 or rest >= len(l): continue
        if cc > 60 and rest > LIMIT: continue   # a deep continuation that would still be too long reads worse
        cands.append((len(st), -col, col, cc, st[-1]))
    if not cands: return None
    _, _, col, cc, br = min(cands)
    new = _split(lines, r, col, cc)
    nxt = [(t, st) for t, st in toks if t.start[0] == r + 1 and t.type not in (tokenize.NL, tokenize.INDENT, tokenize.DEDENT)]
    tail = [t for t, _ in row if t.start[1] >= col]
    if (nxt and nxt[0][0].type != tokenize.COMMENT and nxt[0][0].start[1] == cc and nxt[0][1] and nxt[0][1][-1] == br
            and not any(t.type == tokenize.COMMENT for t in tail)):   # the rest joins the next line of the same bracket
        new = new[:r] + [new[r] + ' ' + new[r + 1].lstrip()] + new[r + 2:]
    return new

def _blocks(n):
    for f in ('body', 'orelse', 'finalbody'):
        b = getattr(n, f, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt): yield b
    for h in getattr(n, 'handlers', []): yield h.body

def fix_compound(lines, r, tree):
    "A one-line compound statement (`if x: y`, `for ...: y`, `def f(): return y`): its body moves to its own line."
    l = lines[r - 1]
    for n in ast.walk(tree):
        for b in _blocks(n):
            if b[0].lineno != r or b[-1].end_lineno != r: continue
            col = _bytecol(l, b[0].col_offset)
            if not l[:col].rstrip().endswith(':'): continue
            return lines[:r - 1] + [l[:col].rstrip(), ' ' * (_indent(lines[n.lineno - 1]) + 4) + l[col:]] + lines[r:]
    return None

def fix_semicolon(lines, r, toks):
    "Statements joined by `;` on a long line: one moves to the next line."
    l = lines[r - 1]
    semis = [t for t, st in toks if t.start[0] == r and t.type == tokenize.OP and t.string == ';' and not st]
    if not semis: return None
    first = next(t for t, _ in toks if t.end[0] >= r and t.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL))
    if first.start[0] != r: return None
    fit = [t for t in semis if t.end[1] <= LIMIT]
    t = fit[-1] if fit else semis[0]
    return lines[:r - 1] + [l[:t.start[1]].rstrip(), ' ' * _indent(l) + l[t.end[1]:].lstrip()] + lines[r:]

def _docstrings(tree, module:bool):
    "The docstring `Constant` nodes of `tree` (the module's only when `module`)."
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (module and isinstance(n, ast.Module)):
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant) \
                    and isinstance(n.body[0].value.value, str): yield n.body[0].value

def fix_docstring(lines, r, tree, module):
    "A one-line docstring over the limit becomes a triple-quoted one wrapped at words (the house's long-docstring form)."
    l = lines[r - 1]
    for d in _docstrings(tree, module):
        if d.lineno != r or d.end_lineno != r: continue
        a, b = _bytecol(l, d.col_offset), _bytecol(l, d.end_col_offset)
        s = l[a:b]
        if not re.fullmatch(r'"[^"\\]*"|\'[^\'\\]*\'', s): return None
        ws = textwrap.wrap(s[1:-1], width=LIMIT - a - 3, break_long_words=False, break_on_hyphens=False)
        if len(ws) < 2 or ws[-1].endswith('"'): return None
        body = [l[:a] + '"""' + ws[0]] + [' ' * a + w for w in ws[1:]]
        body[-1] += '"""' + l[b:]
        return lines[:r - 1] + body + lines[r:]
    return None

def _str_parts(s:str):
    m = re.match(r'([a-zA-Z]*)(\'\'\'|"""|\'|")', s)
    return m.group(1), m.group(2)

def fix_string(lines, r, toks):
    "Split a string literal crossing the limit into implicitly concatenated pieces (parenthesised where needed)."
    l = lines[r - 1]
    for t, st in toks:
        if t.type != tokenize.STRING or t.start[0] != r or t.end[0] != r or t.end[1] <= LIMIT: continue
        pre, q = _str_parts(t.string)
        if len(q) == 3 or 'b' in pre.lower() and 'r' in pre.lower(): continue
        c0 = t.start[1]; body0 = c0 + len(pre) + len(q)
        paren = not st
        shift = 1 if paren else 0
        best, depth, esc = None, 0, False
        isf, raw = 'f' in pre.lower(), 'r' in pre.lower()
        body = t.string[len(pre) + len(q):-len(q)]
        for i, ch in enumerate(body):
            if isf:
                if ch == '{': depth += 1
                elif ch == '}': depth -= 1
            if esc: esc = False; split_after_nl = ch == 'n' and not raw
            else:
                split_after_nl = False
                if ch == '\\': esc = True; continue
            ok = depth == 0 and (ch == ' ' or split_after_nl) and i >= 10 and i < len(body) - 5
            if ok and body0 + shift + i + 1 + len(q) <= LIMIT:
                if best is None or split_after_nl or not best[1] or i > best[0] + 20: best = (i, split_after_nl)
        if best is None: continue
        i = best[0] + 1
        a, b = body[:i], body[i:]
        pa = pre if not isf or '{' in a or '}' in a else pre.replace('f', '').replace('F', '')
        pb = pre if not isf or '{' in b or '}' in b else pre.replace('f', '').replace('F', '')
        new = f'{pa}{q}{a}{q}', f'{pb}{q}{b}{q}'
        head, tail = l[:c0], l[t.end[1]:]
        cc = c0 + shift
        if paren: return lines[:r - 1] + [head + '(' + new[0], ' ' * cc + new[1] + ')' + tail] + lines[r:]
        return lines[:r - 1] + [head + new[0], ' ' * cc + new[1] + tail] + lines[r:]
    return None

def fix_parens(lines, r, tree, boolop=False):
    "Parenthesise the one-line expression of a statement starting at line `r` that has nothing bracketed to break in."
    l = lines[r - 1]
    for n in ast.walk(tree):
        if not isinstance(n, ast.stmt) or n.lineno != r: continue
        if isinstance(n, ast.ImportFrom) and n.end_lineno == r and '(' not in l:
            m = re.match(r'(\s*from\s+\S+\s+import\s+)(.*?)(\s*(#.*)?)$', l)
            if m: return lines[:r - 1] + [m.group(1) + '(' + m.group(2) + ')' + m.group(3)] + lines[r:]
        e = n.test if isinstance(n, ast.Assert) else getattr(n, 'value', None) if isinstance(
            n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)) else None
        if e is None or e.lineno != r or e.end_lineno != r or (boolop and not isinstance(e, ast.BoolOp)): continue
        a, b = _bytecol(l, e.col_offset), _bytecol(l, e.end_col_offset)
        if l[a - 1:a] == '(' and l[b:b + 1] == ')': continue
        return lines[:r - 1] + [l[:a] + '(' + l[a:b] + ')' + l[b:]] + lines[r:]
    return None

def wrap(src:str, module=False) -> tuple[str, int]:
    "`src` with its long lines rewrapped where possible, and the number of lines left over the limit."
    lines, r, steps, undo = src.split('\n'), 1, 0, None
    while r <= len(lines) and steps < 2000:
        steps += 1
        if len(lines[r - 1]) <= LIMIT: r += 1; continue
        text = '\n'.join(lines)
        toks = tokens(text)
        tree = ast.parse(text)
        new = (fix_comment(lines, r, toks) or fix_docstring(lines, r, tree, module) or fix_compound(lines, r, tree)
               or fix_semicolon(lines, r, toks))
        parens = new is None and undo is None and fix_parens(lines, r, tree, boolop=True)
        if parens: new = parens
        elif new is None: new = fix_break(lines, r, toks) or fix_string(lines, r, toks)
        if new is None and undo is None: new = parens = fix_parens(lines, r, tree)
        if new is None:
            if undo is not None: lines = undo   # the parentheses did not help: take them out again
            undo, r = None, r + 1
        else: undo, lines = (lines if parens else None), new
    return '\n'.join(lines), sum(len(l) > LIMIT for l in lines)

def _norm(src:str, module:bool) -> str:
    "`src`'s AST dump, docstrings with their whitespace squashed (a rewrapped docstring reads the same)."
    tree = ast.parse(src)
    for d in _docstrings(tree, module): d.value = ' '.join(d.value.split())
    return ast.dump(tree)

def same(a:str, b:str, module=False) -> bool:
    try: return _norm(a, module) == _norm(b, module)
    except SyntaxError: return False

def long_lines(s:str) -> int: return sum(len(l) > LIMIT for l in s.split('\n'))

def process(src:str, where:str, report:dict, module=False):
    "The rewrapped `src`, or None where nothing changes or the AST check fails (reported)."
    if not long_lines(src): return None
    try: ast.parse(src)
    except SyntaxError:
        report['unparsed'].append((where, long_lines(src))); return None
    new, left = wrap(src, module)
    if new == src: report['left'].append((where, left)); return None
    if not same(src, new, module):
        report['ast'].append((where, long_lines(src))); return None
    if left: report['left'].append((where, left))
    report['changed'] += 1
    return new

def main(args):
    dry = '--dry-run' in args
    paths = [a for a in args if not a.startswith('--')] or sorted(glob('nbs/**/*.ipynb', recursive=True)) + sorted(glob('tests/*.py'))
    report = dict(changed=0, unparsed=[], ast=[], left=[], params=[])
    for p in paths:
        if p.endswith('.ipynb'):
            nb, hit = nbcells.load(p), False
            for c in nb['cells']:
                s = nbcells.source(c)
                if c['cell_type'] != 'code' or EXPORT.match(s): continue
                if 'parameters' in c.get('metadata', {}).get('tags', []):
                    if long_lines(s): report['params'].append((f"{p}#{c['id']}", long_lines(s)))
                    continue
                new = process(s, f"{p}#{c['id']}", report)
                if new is not None: c['source'], hit = nbcells.lines(new), True
            if hit and not dry: nbcells.save(p, nb)
        else:
            s = Path(p).read_text()
            new = process(s, p, report, module=True)
            if new is not None and not dry: Path(p).write_text(new)
    print(f"changed {report['changed']} cells/files")
    for k in ('unparsed', 'ast', 'left', 'params'):
        print(f"{k}: {sum(n for _, n in report[k])} long lines in {len(report[k])}")
        for w, n in report[k]: print(f'  {n} {w}')

if __name__ == '__main__': main(sys.argv[1:])
