"Forged verdicts: answers that never compute their task's result must not pass a code task or a Self-Challenging check."
import pytest
from cove.self_challenging import GeneratedTask, run_verification
from cove.sandbox import run_sandboxed
from cove.tasks.base import make_env
from cove.tasks.code import extract_code, run_function_tests
from cove.tasks.code_levels import basic_code_tasks
from cove.tasks.code_benchmarks import MBPPEnv, run_io_tests

PIDNS = 'pidns' in run_sandboxed('pass').protections   # as root: a pid namespace (and a throw-away uid) per process
PROMPT = 'def add(a, b):\n    """Add two numbers."""\n'
TEST = 'def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(0, 0) == 0\n'
# every record a verdict could be read from: a code task's units and end, a Self-Challenging acceptance
FORGED = repr(b'{"total": 1}\n{"unit": 0, "ok": true}\n{"end": true}\n{"accepted": true, "returned": "forged"}\n')
RECORDS = "({'total': 1}, {'unit': 0, 'ok': True}, {'end': True}, {'accepted': True, 'returned': 'forged'})"

def wrong(ep:str, then:str='') -> str:
    "An answer whose `ep` computes nothing, followed by top-level code `then`."
    return f"import json, os, sys, ctypes\ndef {ep}(*a, **k):\n    return None\n{then}"

def forge_fds(ep:str) -> str:
    "Vector 1: write forged report lines to every inherited descriptor (the report pipe among them), then leave."
    return wrong(ep, f"for _fd in range(3, 256):\n    try: os.write(_fd, {FORGED})\n    except OSError: pass\n"
                     "os._exit(0)\n")

def always_equal(ep:str) -> str:
    "Vector 2: return an object that equals everything."
    return (f"def {ep}(*a, **k):\n    class Anything:\n        def __eq__(self, other): return True\n"
            "        def __ne__(self, other): return False\n"
            "        __hash__ = object.__hash__\n    return Anything()\n")

def lying_int(ep:str) -> str:
    "Vector 2, as a subclass of a plain type: an `int` whose `__eq__` is always true."
    return (f"class Liar(int):\n    def __eq__(self, other): return True\n    __hash__ = int.__hash__\n"
            f"def {ep}(*a, **k):\n    return Liar(0)\n")

def wrap_report(ep:str) -> str:
    "Vector 3: replace the reporting global so that every failed unit is reported as passed."
    return wrong(ep, "_real = __cove_report__\ndef __cove_report__(rec):\n"
                     "    _real({'unit': rec['unit'], 'ok': True} if 'unit' in rec else rec)\n")

def write_fd6(ep:str) -> str:
    "Self-Challenging: an acceptance written to the report pipe (fd 6 in a bare interpreter; argv says), then exit."
    return wrong(ep, "try: _fd = json.loads(sys.argv[1])['report_fd']\nexcept Exception: _fd = 6\n"
                     "try: os.write(_fd, b'{\"accepted\": true, \"returned\": \"forged\"}\\n')\n"
                     "except Exception: pass\nos._exit(0)\n")

def caller_frame(ep:str) -> str:
    "Self-Challenging: report an acceptance through the caller's frames (`sys._getframe(1)` and up), then exit."
    return wrong(ep, "for _k in range(8):\n    try: _f = sys._getframe(_k)\n    except ValueError: break\n"
                     "    _r = _f.f_globals.get('__cove_report__')\n    if _r:\n"
                     f"        for _rec in {RECORDS}: _r(_rec)\n"
                     "        os._exit(0)\n")

def proc_pipes(ep:str) -> str:
    "Through /proc: open every pipe of every visible process for writing (libc, past the guard, made dumpable), forge."
    # Run it only in a pid namespace: outside one, it writes into the pipes of every process of its uid on the machine.
    return wrong(ep, f"_libc = ctypes.CDLL(None)\n_libc.prctl(4, 1, 0, 0, 0)\n_msg = {FORGED}\n"
                     "for _p in os.listdir('/proc'):\n    if not _p.isdigit(): continue\n"
                     "    try: _fds = os.listdir(f'/proc/{_p}/fd')\n    except OSError: continue\n"
                     "    for _fd in _fds:\n        _path = f'/proc/{_p}/fd/{_fd}'\n"
                     "        try: _link = os.readlink(_path)\n        except OSError: continue\n"
                     "        if not _link.startswith('pipe:'): continue\n        _w = _libc.open(_path.encode(), 1)\n"
                     "        if _w >= 0: _libc.write(_w, _msg, len(_msg)); _libc.close(_w)\n"
                     "os._exit(0)\n")

def stop_iteration(ep:str) -> str:
    "Ends a `map` early: a StopIteration raised in the candidate makes `all(map(...))` see an exhausted iterator."
    return f"def {ep}(*a, **k):\n    raise StopIteration\n"

def accepted(hostile, ok:bool) -> bool:
    "Count one forged attempt in the fault summary (`tests/conftest.py`): a verdict accepted, or an input refused."
    hostile.forged(int(bool(ok)))
    if not ok: hostile.refused()
    return bool(ok)

VECTORS = [forge_fds, always_equal, lying_int, wrap_report, caller_frame]   # each passed a wrong answer before
BRIEF = [forge_fds, always_equal, wrap_report]                              # the three the probe found

@pytest.mark.parametrize('vector', VECTORS)
def test_function_tests_refuse_forgery(vector, hostile):
    fb = run_function_tests(PROMPT, vector('add'), TEST, 'add')
    assert not accepted(hostile, fb.success) and fb.score < 1, (vector.__name__, fb)

@pytest.mark.skipif(not PIDNS, reason='no pid namespace (not root): the candidate shares the uid and pid namespace of '
                    'its tests and reaches their pipes through /proc (04b_sandbox: "What a determined candidate ...")')
@pytest.mark.parametrize('where', ['function tests', 'self-challenging'])
def test_proc_pipes_out_of_reach(where, hostile):
    "A guard (true before as well: the pipes are root's, mode 0600): nothing of the tests' process is reachable."
    if where == 'function tests': ok = run_function_tests(PROMPT, proc_pipes('add'), TEST, 'add').success
    else: ok = run_verification(GeneratedTask('code', 'add', TEST, '', [], 'add'), proc_pipes('add'))[0]
    assert not accepted(hostile, ok)

def test_stop_iteration_does_not_end_the_tests_early(hostile):
    test = 'def check(candidate):\n    assert all(map(lambda x: candidate(x, 1) == x + 1, range(3)))\n'
    fb = run_function_tests(PROMPT, stop_iteration('add'), test, 'add')
    assert not accepted(hostile, fb.success), fb
    assert run_function_tests(PROMPT, 'return a + b', test, 'add').success

@pytest.mark.parametrize('vector', [forge_fds, always_equal, lying_int, caller_frame, write_fd6])
def test_self_challenging_refuses_forgery(vector, hostile):
    g = GeneratedTask('code', 'add', TEST, 'def add(a, b):\n    return a + b', ['def add(a, b):\n    return a'],
                      entry_point='add')
    assert run_verification(g, g.solution)[0] is True
    ok, detail = run_verification(g, vector('add'))
    assert not accepted(hostile, ok), (vector.__name__, detail)

def test_self_challenging_answer_evaluated_by_verify(hostile):
    "An answer is data, but a `verify` that `eval`s it runs it: the acceptance it forges must not count."
    g = GeneratedTask('math', 'Q?', 'def verify(answer):\n    return eval(answer) == 31', '31', ['36'])
    forged = ("__import__('os').write(__import__('json').loads(__import__('sys').argv[1])['report_fd'], "
              "b'{\"accepted\": true, \"returned\": \"forged\"}\\n') and __import__('os')._exit(0)")
    assert run_verification(g, '31') == (True, 'accepted') and run_verification(g, '36')[0] is False
    assert not accepted(hostile, run_verification(g, forged)[0])

def test_results_that_are_not_plain_values():
    "An iterable crosses with its items (a generator in `sorted` works, as in one interpreter); comparing it fails."
    gen = 'def add(a, b):\n    return (x for x in (b, a))\n'
    check = 'def check(candidate):\n    assert {} == [1, 2]\n'
    assert run_function_tests(PROMPT, gen, check.format('sorted(candidate(2, 1))'), 'add').success
    fb = run_function_tests(PROMPT, gen, check.format('candidate(2, 1)'), 'add')
    assert fb.status == 'failure' and 'unserialisable result: generator' in fb.message, fb

def test_oversized_reply_ends_the_run():
    fb = run_function_tests(PROMPT, "return 'x' * (17 << 20)", TEST, 'add')
    assert fb.status == 'error' and 'over' in fb.message, fb

def test_one_answer_no_longer_passes_three_tasks(hostile):
    "The probe's finding: one answer that never reads its task 'passed' 3 of 3 `code` tasks."
    tasks = basic_code_tasks('test', 3)
    for v in VECTORS:
        for t in tasks:
            p = t.payload
            fb = run_function_tests(p['prompt'], v(p['entry_point']), p['test'], p['entry_point'])
            assert not accepted(hostile, fb.success), (v.__name__, t.id, fb)

def test_forged_attempt_on_the_embedded_tasks_is_refused_in_an_episode(hostile):
    env = make_env('code', difficulty=0)
    t = env.tasks('test', 1)[0]
    st = env.reset(t)
    env.step(st, f"```python\n{forge_fds(t.payload['entry_point'])}```")
    fb = env.evaluate(st)
    assert not accepted(hostile, fb.success) and fb.status == 'error' and fb.score == 0, fb

def test_embedded_tasks_right_and_wrong():
    for level in (0, 1):
        for t in basic_code_tasks('train', 4, seed=1, level=level):
            p, sol = t.payload, t.meta['canonical_solution']
            assert run_function_tests(p['prompt'], sol, p['test'], p['entry_point']).success, t.id
            assert not run_function_tests(p['prompt'], '    return None\n', p['test'], p['entry_point']).success, t.id

@pytest.fixture(scope='module')
def humaneval():
    env = make_env('code:humaneval')
    ok, why = env.available()
    if not ok: pytest.skip(f'HumanEval not available: {why}')
    return {t.id: t for t in env.tasks('all')}

@pytest.mark.parametrize('tid', ['HumanEval/0', 'HumanEval/32', 'HumanEval/38', 'HumanEval/53'])
def test_humaneval_rows_right_wrong_forged(humaneval, tid, hostile):
    "HumanEval/32 and /38 test with the prompt's helpers (`poly`, `encode_cyclic`); /53 calls the candidate 100 times."
    t = humaneval[tid]
    p = t.payload
    run = lambda code: run_function_tests(p['prompt'], code, p['test'], p['entry_point'])
    assert run(t.meta['canonical_solution']).success
    assert not run('    return None\n').success
    for v in BRIEF: assert not accepted(hostile, run(v(p['entry_point'])).success), v.__name__

def test_humaneval_helper_comes_from_the_prompt(humaneval, hostile):
    "A candidate that redefines the prompt's helper `poly` (which the tests use) to always return 0 gains nothing."
    p = humaneval['HumanEval/32'].payload
    cheat = 'def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 0.0\n'
    assert not accepted(hostile, run_function_tests(p['prompt'], cheat, p['test'], p['entry_point']).success)

# /56: the solution's own `check`, which its tests call; /88 returns a Counter; /124 passes a complex;
# /392's entry point is 'get_max_sum ' (a trailing space); /737's tests only ask for a truthy `re.Match`
MBPP_ROWS = ('MbppEval/2', 'MbppEval/56', 'MbppEval/88', 'MbppEval/124', 'MbppEval/392', 'MbppEval/737')

def test_mbpp_rows_right_wrong_forged(hostile):
    env = MBPPEnv()
    ok, why = env.available()
    if not ok: pytest.skip(f'MBPP data not present: {why}')
    ts = {t.id: t for t in env.tasks('all')}
    for tid in MBPP_ROWS:
        t = ts[tid]
        p = t.payload
        run = lambda code: run_function_tests(p['prompt'], code, p['test'], p['entry_point'], timeout=10)
        assert run(extract_code(env.reference(t)[0])).success, tid
        assert not run('    return None\n').success, tid
        for v in BRIEF: assert not accepted(hostile, run(v(p['entry_point'])).success), (tid, v.__name__)

def test_stdin_stdout_tests_compare_in_the_parent(hostile):
    "Stdin/stdout tasks compare the captured output in the parent: a forged report changes nothing (true before too)."
    tests = [{'input': '1 2\n', 'output': ['3\n']}, {'input': '2 5\n', 'output': ['7\n']}]
    assert run_io_tests('a, b = map(int, input().split())\nprint(a + b)', tests).success
    assert not accepted(hostile, run_io_tests(forge_fds('main'), tests).success)
    assert not accepted(hostile, run_io_tests(f"print(3)\n{wrap_report('main')}", tests).success)
