"""`code:bigcodebench` (MemRL's first table): each task's own unittest in the sandbox; tasks whose libraries do not
import, or whose reference fails here, listed as unavailable, never scored; the oracle passes every task handed out."""
import gzip, json, os, subprocess, sys
from pathlib import Path
import pytest
from cove.core import Feedback
from cove.tasks.base import DataUnavailable, make_env, replay_reference
from cove.tasks.code_benchmarks import BigCodeBenchEnv, lib_problems, reference_cause, run_unittest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent/'shared'/'datasets'
LAUNCH = [sys.executable, '-c', 'import sys; from cove.cli import main; sys.exit(main(sys.argv[1:]))']
TEST = ("import unittest\nclass TestCases(unittest.TestCase):\n"
        "    def test_sum(self):\n        self.assertEqual(task_func([1, 2]), 3)\n"
        "    def test_empty(self):\n        self.assertEqual(task_func([]), 0)\n")
ROW = {'task_id': 'BigCodeBench/9001', 'instruct_prompt': 'Sum a list.\n```\nimport math\ndef task_func(xs):\n```',
       'complete_prompt': 'import math\ndef task_func(xs):\n    """Sum."""\n',
       'canonical_solution': '    return math.fsum(xs)\n', 'test': TEST, 'entry_point': 'task_func', 'libs': "['math']"}
RIGHT = ROW['complete_prompt'] + ROW['canonical_solution']

@pytest.fixture
def fixture_root(tmp_path):
    "A datasets root whose `bigcodebench/`: a good task, one lacking a library, one failing its reference, a bad row."
    rows = [ROW, ROW | {'task_id': 'BigCodeBench/9002', 'libs': "['math', 'no_such_lib_xyz']"},
            ROW | {'task_id': 'BigCodeBench/9003', 'canonical_solution': '    return 0\n'},
            {'task_id': 'BigCodeBench/9004'}]
    (tmp_path/'bigcodebench').mkdir()
    data = gzip.compress('\n'.join(map(json.dumps, rows)).encode())
    (tmp_path/'bigcodebench'/'BigCodeBench.jsonl.gz').write_bytes(data)
    return tmp_path

def test_unittest_verdicts():
    assert run_unittest(RIGHT, TEST, timeout=30) == Feedback('success', 1.0, 'all 2 tests passed')
    fb = run_unittest('def task_func(xs):\n    return 3\n', TEST, timeout=30)
    assert (fb.status, fb.score, fb.kind) == ('failure', 0.5, 'test_failed') and 'AssertionError' in fb.message
    syntax = run_unittest('def task_func(xs):\n    return sum(xs\n', TEST, timeout=30)
    assert syntax.message.startswith('the program did not run: SyntaxError')
    assert run_unittest('import time\ndef task_func(xs):\n    time.sleep(60)\n', TEST, timeout=3).status == 'timeout'

def test_reports_written_by_the_answer_are_refused(hostile):
    "Reports on every descriptor, then an exit before the harness reports: no report bears the nonce, none is believed."
    forged = ("import json, os\ndef task_func(xs):\n    return None\n"
              "rec = json.dumps(dict(nonce='', n=2, failures=[], errors=[]))\n"
              "for fd in range(3, 256):\n    try: os.write(fd, (rec + '\\n').encode())\n    except OSError: pass\n")
    for then in ('', 'os._exit(0)\n'):
        fb = run_unittest(forged + then, TEST, timeout=30)
        hostile.forged(int(fb.success))
        assert not fb.success, fb
        hostile.refused()

def test_unavailable_tasks_are_listed_not_scored(fixture_root):
    env = make_env('code:bigcodebench', data_dir=fixture_root)
    assert isinstance(env, BigCodeBenchEnv) and env.available() == (True, '')
    assert [t.id for t in env.load()] == ['BigCodeBench/9001', 'BigCodeBench/9003']
    assert env.report.n_bad == 1
    assert [t.id for t in env.tasks('all')] == ['BigCodeBench/9001']
    assert env.unavailable['BigCodeBench/9002'] == 'libraries not importable here: no_such_lib_xyz (not installed)'
    assert env.unavailable["BigCodeBench/9003"].startswith("its reference fails here: 1/2 tests failed; first: Asser")
    assert env.unavailable_counts() == {'no_such_lib_xyz not importable': 1, 'reference: AssertionError': 1}
    t = env.tasks('all')[0]
    assert replay_reference(env, t).success                          # the oracle's own path: code block, step, evaluate
    assert lib_problems(['json', 'no_such_lib_xyz']) == {'no_such_lib_xyz': 'not installed'}
    assert reference_cause(Feedback('timeout', 0.0, 'timeout after 1 s')) == 'reference: timeout'

def test_missing_data_is_a_clear_error(tmp_path):
    env = make_env('code:bigcodebench', data_dir=tmp_path)
    ok, why = env.available()
    assert not ok and 'bigcodebench' in why
    with pytest.raises(DataUnavailable): env.load()

def test_oracle_run_from_the_command_line(fixture_root, tmp_path):
    "`cove run --method oracle`: the available task passes; the log says how many tasks are unavailable and why."
    out = tmp_path/'run'
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'}
    args = ['run', '--method', 'oracle', '--tasks', 'code:bigcodebench', '--episodes', '3', '--split', 'all',
            '--set', f'data.dir={fixture_root}', '--out', str(out), '--quiet']
    r = subprocess.run(LAUNCH + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((out/'metrics.json').read_text())
    assert (m['overall']['n'], m['overall']['successes']) == (1, 1)
    assert ('code:bigcodebench: 2 of 3 tasks available; 1 unavailable: 1 for their libraries '
            '(no_such_lib_xyz not importable: 1)') in r.stderr
    assert '1 of 2 references checked fail here (BigCodeBench/9003: 1/2 tests failed; first: AssertionError' in r.stderr

needs_data = pytest.mark.skipif(not (DATA/'bigcodebench').is_dir(), reason=f'BigCodeBench data not found under {DATA}')

@needs_data
def test_real_data_loads_and_a_sample_passes_its_oracle():
    env = BigCodeBenchEnv(DATA)
    ts = env.load()
    by_libs = sum(w.startswith('libraries') for w in env.unavailable.values())
    assert len(ts) + by_libs + env.report.n_bad == 1140 and env.report.n_bad == 0
    assert len(ts) > 1000, env.unavailable_summary()
    sample = env.tasks('test', 4, seed=0)
    assert len(sample) == 4 and all(t.split == 'test' for t in sample)
    assert all(replay_reference(env, t).success for t in sample)
    assert env.tasks('test', 4, seed=0) == sample                    # the same sample again, from the checks made

def test_memrl_learns_on_bigcodebench_with_the_authors_settings(fixture_root, tmp_path):
    """MemRL on `code:bigcodebench`, q_min -0.8, ε 0.1, k2 5: an answer that crashes is a failure it learns from (reward
    -1)."""
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.run import Run, RunSpec
    import cove.memrl
    cfg = load_config(overrides={'model.name': 'tiny', 'model.max_new_tokens': 8, 'run.epochs': 2,
                                 'data.dir': str(fixture_root), 'memrl.q_min': '-0.8', 'memrl.epsilon': 0.1,
                                 'memrl.k2': 5})
    run = Run(RunSpec('memrl', ['code:bigcodebench'], 1, 'all', 0), cfg, tmp_path/'run')
    m = run.execute(HFPolicy.load('tiny'), progress=False)
    recs = [json.loads(l) for l in (tmp_path/'run'/'episodes.jsonl').read_text().splitlines()]
    assert [r['status'] for r in recs] == ['error', 'error'] and {r['kind'] for r in recs} == {'runtime_error'}, recs
    assert (m['errors_skipped'], m['memory']['size'], m['q_updates']) == (0, 2, 1)
    assert recs[1]['memrl']['retrieval']['pool'] and recs[1]['memrl']['reward'] == -1.0
    assert m['memrl_params']['q_min'] == -0.8 and m['memrl_params']['epsilon'] == 0.1

# Issue 42, item 2: verdicts outside the candidate's reach, tamper evidence where the tests run beside its objects.
WRONG = "import os, sys, unittest\ndef task_func(xs):\n    return None\n"
FRAMES = WRONG + ("for _k in range(64):\n    try: _f = sys._getframe(_k)\n    except ValueError: break\n"
                  "    for _ns in (_f.f_globals, _f.f_locals):\n"
                  "        _send, _nonce = _ns.get('_send') or _ns.get('report'), _ns.get('_nonce')\n"
                  "        if callable(_send) and _nonce:\n"
                  "            _send(dict(nonce=_nonce, n=2, failures=[], errors=[]))\n            os._exit(0)\n")
SECRETS = WRONG + '''import gc, json, re, types
_hex, _calls, _seen = set(), [], set()
def _look(ns, depth=0):
    if id(ns) in _seen or depth > 2: return
    _seen.add(id(ns))
    for _v in list(ns.values()):
        if isinstance(_v, str) and re.fullmatch('[0-9a-f]{32}', _v): _hex.add(_v)
        elif isinstance(_v, types.FunctionType):
            if _v.__closure__: _look({str(i): c.cell_contents for i, c in enumerate(_v.__closure__)}, depth + 1)
            if _v.__defaults__: _look({str(i): d for i, d in enumerate(_v.__defaults__)}, depth + 1)
            _calls.append(_v)
        elif isinstance(_v, dict): _look(_v, depth + 1)
_k = 0
while True:
    try: _f = sys._getframe(_k)
    except ValueError: break
    _look(_f.f_globals); _look(_f.f_locals); _k += 1
for _m in list(sys.modules.values()): _look(getattr(_m, '__dict__', {}))
for _n in _hex:
    _rec = dict(nonce=_n, n=2, failures=[], errors=[])
    for _fd in range(3, 256):
        try: os.write(_fd, (json.dumps(_rec) + '\\n').encode())
        except OSError: pass
    for _c in _calls:
        if _c.__code__.co_argcount == 1 and 'write' in _c.__code__.co_names:
            try: _c(_rec)
            except Exception: pass
if _hex: os._exit(0)
'''
ADD_FAILURE = WRONG + ("unittest.TestResult.addFailure = lambda *a, **k: None\n"
                       "unittest.TestResult.addError = lambda *a, **k: None\n")
DROP_LISTS = WRONG + ("class _Drop(list):\n    def append(self, x): pass\n"
                      "_init = unittest.TestResult.__init__\n"
                      "def _new_init(self, *a, **k):\n    _init(self, *a, **k)\n"
                      "    self.failures, self.errors = _Drop(), _Drop()\n"
                      "unittest.TestResult.__init__ = _new_init\n")
NO_BODY = WRONG + ("def _run(self, result=None):\n    result.startTest(self)\n    result.addSuccess(self)\n"
                   "    result.stopTest(self)\n    return result\nunittest.TestCase.run = _run\n")
EARLY_EXIT = "import os\ndef task_func(xs):\n    os._exit(0)\n"

@pytest.mark.parametrize('name,code', [('frames', FRAMES), ('secrets', SECRETS)])
def test_no_report_channel_or_nonce_in_reach(name, code, hostile):
    "The probe's vector: `_send` and `_nonce` from the caller's frames (and any 32-hex string or writer in reach)."
    fb = run_unittest(code, TEST, timeout=30)
    hostile.forged(int(fb.success))
    assert not fb.success, fb
    hostile.refused()

@pytest.mark.parametrize('name,code', [('addFailure/addError', ADD_FAILURE), ('failures/errors lists', DROP_LISTS),
                                       ('TestCase.run', NO_BODY), ('exit before the end', EARLY_EXIT)])
def test_tampering_with_the_runner_is_a_tampered_failure(name, code, hostile):
    fb = run_unittest(code, TEST, timeout=30)
    hostile.forged(int(fb.success))
    assert (fb.status, fb.score, fb.kind) == ('error', 0.0, 'tampered'), fb
    hostile.refused()

def test_honest_answers_are_not_called_tampered():
    "Skips, subtests, expected failures, a crash and `sys.exit` in a test keep their plain verdicts."
    test = ("import unittest, sys\nclass TestCases(unittest.TestCase):\n"
            "    def test_sum(self):\n        self.assertEqual(task_func([1, 2]), 3)\n"
            "    @unittest.skip('not here')\n    def test_skipped(self):\n        self.fail()\n"
            "    def test_sub(self):\n        for x in (1, 2):\n            with self.subTest(x=x):\n"
            "                self.assertEqual(task_func([x]), x)\n"
            "    @unittest.expectedFailure\n    def test_xfail(self):\n        self.assertEqual(1, 2)\n")
    assert run_unittest(RIGHT, test, timeout=30) == Feedback('success', 1.0, 'all 4 tests passed')
    sub = run_unittest('def task_func(xs):\n    return 3\n', test, timeout=30)
    assert (sub.status, sub.kind) == ('failure', 'test_failed'), sub
    ex = run_unittest('import sys\ndef task_func(xs):\n    sys.exit(0)\n', TEST, timeout=30)
    assert (ex.status, ex.kind) == ('failure', 'test_failed'), ex
    crash = run_unittest('import os\ndef task_func(xs):\n    os.abort()\n', TEST, timeout=30)   # ctypes: sealed off
    assert (crash.status, crash.kind) == ('error', 'runtime_error'), crash

def test_tampering_is_counted_in_metrics():
    "A `tampered` verdict is an error kind of its own in `metrics.json`'s `error_kinds`."
    from cove.stats import summarise
    fb = run_unittest(ADD_FAILURE, TEST, timeout=30)
    rec = dict(status=fb.status, score=fb.score, message=fb.message, kind=fb.kind, prompt_tokens=0,
               completion_tokens=0)
    assert summarise([rec])['error_kinds'] == {'tampered': 1}

# Issue 42, item 3: tests that cannot pass vacuously are refused at load.
def test_vacuous_or_broken_tests_are_refused_at_load(tmp_path):
    rows = [ROW, ROW | {'task_id': 'BigCodeBench/9005',
                        'test': "import unittest\nclass TestCases(unittest.TestCase):\n    def test_a(self):\n"
                                "        task_func([1])\n"},
            ROW | {'task_id': 'BigCodeBench/9006', 'test': TEST.replace('def test_sum(self):', 'def test_sum(self:')}]
    (tmp_path/'bigcodebench').mkdir()
    (tmp_path/'bigcodebench'/'b.jsonl').write_text('\n'.join(map(json.dumps, rows)) + '\n')
    env = BigCodeBenchEnv(tmp_path)
    assert [t.id for t in env.load()] == ['BigCodeBench/9001']
    assert env.report.n_bad == 2
    assert env.report.errors[0].startswith('b.jsonl:2: ValueError: the tests hold no assertion'), env.report.errors
    assert env.report.errors[1].startswith('b.jsonl:3: ValueError: the tests do not parse'), env.report.errors
