"""The house's conventions: short example and test lines, and no reference to a document the tree does not hold."""
import ast, json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Example lines are the non-exported code cells of `nbs/**/*.ipynb`, test lines `tests/*.py`.
def _code_cells(pattern):
    for p in sorted(ROOT.glob(pattern)):
        for c in json.loads(p.read_text())['cells']:
            if c['cell_type'] == 'code': yield ''.join(c['source'])

def test_example_and_test_lines_fit():
    ex = [l for s in _code_cells('nbs/**/*.ipynb') if not s.lstrip().startswith(('#| export', '#|export'))
          for l in s.split('\n')]
    te = [l for p in sorted((ROOT/'tests').glob('*.py')) for l in p.read_text().split('\n')]
    for what, lines in (('example', ex), ('test', te)):
        long = sum(len(l) > 120 for l in lines)
        assert long <= 0.01 * len(lines), f"{long} of {len(lines)} {what} lines over 120 characters (target <= 1%)"

def test_no_reference_to_documents_outside_the_tree():
    "SPEC.md and STYLE.md are the team's, not the repository's: cite a paper's section or a page in docs/."
    outside = ('SPEC §', 'STYLE.md', 'SPEC.md')
    cited = [str(p.relative_to(ROOT)) for d in ('cove', 'nbs', 'docs', 'tools') for p in (ROOT/d).rglob('*')
             if p.suffix in ('.py', '.ipynb', '.md') and any(w in p.read_text() for w in outside)]
    assert not cited, f"a document the repository does not hold is cited in {cited}"

def test_the_package_cites_no_issue():
    "The package explains itself: a comment says why, not which of the project's issues asked for it."
    cite = re.compile(r'\bissues? #?\d+', re.I)
    cited = [f'{p.relative_to(ROOT)}:{i}' for p in sorted((ROOT/'cove').rglob('*.py')) if p.name != '_modidx.py'
             for i, l in enumerate(p.read_text().splitlines(), 1) if cite.search(l)]
    assert not cited, cited

# A parameter's doc is the comment on that parameter's own line: fastcore's `docments` (and so nbdev's pages) reads a
# comment on the return annotation's line as the return value's doc, and one on a closing `)` without one as nobody's.
MISPLACED_DOC = (
    re.compile(r'^\s*\)\s*(->.*)?:\s*#'),      # `):  # doc` or `) -> T:  # doc` on the signature's closing line
    re.compile(r'^.*\) -> .*:\s+#'),           # `def f(x:int=0) -> T:  # doc` or `    last:T=v) -> T:  # doc`
    re.compile(r'^\s*\)\s*=[^#]*,\s*#'),       # `)=None,  # doc` ending an annotation split over lines
)
# A comment on a closing `) -> T:` line of its own is the return value's doc, as nbdev writes it, where the last
# parameter, on the line above, carries its own doc (without that, fastcore gives a `**kwargs` doc to the return).
RETURN_LINE = re.compile(r'^\s*\)\s*->.*:\s*#')
# Other sites where such a comment truly documents the return value: 'module:function' -> why. None does today: each
# found so far documented the last parameter or, in `_bcb_seal`'s inner functions, remarked on the function. A one-line
# method's comment after its body (`def extra(self, res) -> dict: return ...  # doc`) is the return's doc, not flagged.
RETURN_DOCS = {}

def _signatures(p) -> dict:
    "Line number -> 'module:Class.function' for each line of the signatures in `p` (`@patch`ed ones under the class)."
    res, tree = {}, ast.parse(p.read_text())
    def visit(node, prefix):
        for n in ast.iter_child_nodes(node):
            if isinstance(n, ast.ClassDef): visit(n, f"{prefix}{n.name}.")
            if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)): continue
            a, pre = n.args.posonlyargs + n.args.args, prefix
            if any(ast.unparse(d) == 'patch' for d in n.decorator_list) and a and a[0].annotation:
                pre = f"{prefix}{ast.unparse(a[0].annotation)}."
            for i in range(n.lineno, max(n.lineno, n.body[0].lineno - 1) + 1):
                res[i] = f"{'.'.join(p.relative_to(ROOT).with_suffix('').parts)}:{pre}{n.name}"
            visit(n, f"{pre}{n.name}.")
    visit(tree, '')
    return res

def test_parameter_docs_sit_on_their_parameters():
    "No exported signature leaves a parameter's doc where `docments` gives it to the return value, or to nothing."
    hits, allowed = [], set()
    for p in sorted((ROOT/'cove').rglob('*.py')):
        if p.name == '_modidx.py': continue
        sigs = _signatures(p)
        lines = p.read_text().split('\n')
        for i, l in enumerate(lines, 1):
            if not any(r.match(l) for r in MISPLACED_DOC): continue
            if RETURN_LINE.match(l) and i > 1 and '#' in lines[i - 2]: continue   # a return doc below a documented last
            if sigs.get(i) in RETURN_DOCS: allowed.add(sigs[i])
            else: hits.append(f"{p.relative_to(ROOT)}:{i} ({sigs.get(i, 'no signature')}): {l.strip()}")
    assert not hits, "a parameter's doc after the closing `)` or the return annotation:\n" + '\n'.join(hits)
    assert allowed == set(RETURN_DOCS), f"RETURN_DOCS entries no longer found: {sorted(set(RETURN_DOCS) - allowed)}"

def test_an_own_import_inside_a_function_says_why():
    "An import of cove inside a function (not at the top of its module) carries its reason as a comment on its line."
    import ast
    bare = []
    for p in sorted((ROOT/'cove').rglob('*.py')):
        if p.name == '_modidx.py': continue
        src = p.read_text()
        lines = src.splitlines()
        for f in ast.walk(ast.parse(src)):
            if not isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)): continue
            for s in ast.walk(f):
                own = isinstance(s, ast.ImportFrom) and (s.level > 0 or (s.module or '').split('.')[0] == 'cove')
                if own and '#' not in lines[s.lineno - 1]: bare.append(f'{p.relative_to(ROOT)}:{s.lineno}')
    assert not bare, f'own-package imports inside functions without a reason: {bare}'
