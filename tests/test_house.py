"""The house's conventions: short example and test lines, and no reference to a document the tree does not hold."""
import json, re
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

# A parameter's doc is the comment on that parameter's own line: fastcore's `docments` (and so nbdev's pages) reads a
# comment after the return annotation as the return value's doc, and one on a closing `)` without one as nobody's.
MISPLACED_DOC = (
    re.compile(r'^\s*\)\s*(->.*)?:\s*#'),      # `):  # doc` or `) -> T:  # doc` on the signature's closing line
    re.compile(r'^\s*def .*\) -> .*:\s+#'),    # `def f(x:int=0) -> T:  # doc`: the one line is the return's too
    re.compile(r'^\s*\)\s*=[^#]*,\s*#'),       # `)=None,  # doc` ending an annotation split over lines
)
# Where such a comment truly documents the return value: 'path: stripped line' -> why. None does today: each of the
# sites issue 57 found documented the last parameter or, in `_bcb_seal`'s inner functions, remarked on the function.
RETURN_DOCS = {}

def test_parameter_docs_sit_on_their_parameters():
    "No exported signature leaves a parameter's doc where `docments` gives it to the return value, or to nothing."
    hits = [f"{p.relative_to(ROOT)}:{i}: {l.strip()}" for p in sorted((ROOT/'cove').rglob('*.py'))
            if p.name != '_modidx.py' for i, l in enumerate(p.read_text().split('\n'), 1)
            if any(r.match(l) for r in MISPLACED_DOC) and f"{p.relative_to(ROOT)}: {l.strip()}" not in RETURN_DOCS]
    assert not hits, "a parameter's doc after the closing `)` or the return annotation:\n" + '\n'.join(hits)
