"""No circle among cove's modules, nor among the scripts of `tools/` (issue 44 items 1-2).

Every `import` statement counts, those inside functions too: a lazy import hides a circle from the interpreter, not
from a reader, who still has to know both modules to change either. `from cove import x` names the module `cove/x.py`
when there is one; a relative import is resolved against its package; a tool's `import report` (after its
`sys.path` insert) names `tools/report.py`. `cove/_modidx.py` is nbdev's index, not code, and is left out."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def modules(pkg: Path, name: str) -> dict:
    "Dotted module name -> file, for every `.py` under `pkg` (the package called `name`), `_modidx.py` left out."
    out = {}
    for f in sorted(pkg.rglob('*.py')):
        if f.name == '_modidx.py' or '.ipynb_checkpoints' in f.parts: continue
        parts = [name, *f.relative_to(pkg).with_suffix('').parts]
        if parts[-1] == '__init__': parts = parts[:-1]
        out['.'.join(parts)] = f
    return out

def imported(tree: ast.AST, me: str, is_pkg: bool) -> set:
    "Every dotted name an import in `tree` (module `me`) can bind: `from a import b` gives both `a` and `a.b`."
    out = set()
    for node in ast.walk(tree):   # every statement, inside functions and classes too
        if isinstance(node, ast.Import): out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:   # relative: against my package (the module itself when it is a package's __init__)
                pkg = me.split('.') if is_pkg else me.split('.')[:-1]
                pkg = pkg[:len(pkg) - (node.level - 1)]
                base = '.'.join(pkg + ([base] if base else []))
            if base: out.add(base)
            out.update(f'{base}.{a.name}' if base else a.name for a in node.names if a.name != '*')
    return out

def graph(mods: dict) -> dict:
    "Module -> the modules of `mods` it imports (a name resolves to the longest known module it starts with)."
    g = {}
    for me, f in mods.items():
        names = imported(ast.parse(f.read_text(), str(f)), me, f.name == '__init__.py')
        deps = set()
        for n in names:
            parts = n.split('.')
            hit = next(('.'.join(parts[:i]) for i in range(len(parts), 0, -1) if '.'.join(parts[:i]) in mods), None)
            # the bare package (`cove`, an empty `__init__`) is every module's parent, not an edge worth a circle
            if hit and not (hit != me and mods[hit].name == '__init__.py' and not mods[hit].read_text().strip()):
                deps.add(hit)
        g[me] = deps
    return g

def circles(g: dict) -> list:
    "The strongly connected components of `g` with more than one module, and the modules that import themselves."
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):   # Tarjan, iterative: the graph is small, but recursion limits are nobody's business here
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        while work:
            u, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work: low[work[-1][0]] = min(low[work[-1][0]], low[u])
                if low[u] == index[u]:
                    comp = []
                    while True:
                        x = stack.pop(); on.discard(x); comp.append(x)
                        if x == u: break
                    if len(comp) > 1 or u in g[u]: out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = n[0]; n[0] += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(g[w]))))
            elif w in on: low[u] = min(low[u], index[w])
    for v in sorted(g):
        if v not in index: visit(v)
    return sorted(out)

def describe(g: dict, comps: list) -> str:
    "Each circle with the edges that hold it together, one `a -> b` per line."
    return '\n'.join(f"circle {' '.join(c)}:\n" + '\n'.join(f'  {a} -> {b}' for a in c for b in sorted(g[a]) if b in c)
                     for c in comps)

def cove_graph() -> dict: return graph(modules(ROOT/'cove', 'cove'))

def tools_graph() -> dict:
    "The scripts of `tools/` as top-level modules (`import report` after a `sys.path` insert); cove imports none."
    return graph({f.stem: f for f in sorted((ROOT/'tools').glob('*.py'))})

def test_no_circle_in_cove():
    g = cove_graph()
    assert len(g) > 30 and 'cove.tasks.base' in g   # the walk saw the package, subpackages too
    assert not (comps := circles(g)), describe(g, comps)

def test_no_circle_in_tools():
    g = tools_graph()
    assert {'report', 'sweep'} <= set(g)
    assert not (comps := circles(g)), describe(g, comps)

def test_the_check_can_fail(tmp_path):
    "A two-module circle, one side a lazy import inside a function and the other a relative import, is found."
    (pkg := tmp_path/'pkg').mkdir()
    (pkg/'__init__.py').write_text('')
    (pkg/'a.py').write_text('def f():\n    from pkg import b\n    return b\n')
    (pkg/'b.py').write_text('from .a import f\n')
    (pkg/'c.py').write_text('import pkg.a\nfrom . import c\n')   # c imports a (no circle) and itself (a self-loop)
    g = graph(modules(pkg, 'pkg'))
    assert g['pkg.a'] == {'pkg.b'} and g['pkg.b'] == {'pkg.a'} and g['pkg.c'] == {'pkg.a', 'pkg.c'}
    assert circles(g) == [['pkg.a', 'pkg.b'], ['pkg.c']]
    assert 'pkg.a -> pkg.b' in describe(g, circles(g))
