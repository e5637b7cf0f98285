"""Issue 55, forged verdicts: BigCodeBench answers that compute nothing must not pass. Each attack is an answer
program run through `run_unittest` (the sandbox, as the family grades); the tests it faces are real unittest tests
of `task_func(x) == x * 2`. Then the vacuous test shapes: a task whose tests pass a wrong answer is refused."""
import pytest
from cove.tasks.code_benchmarks import run_unittest, vacuous_tests

TEST = '''import unittest
class TestCases(unittest.TestCase):
    def test_small(self):
        self.assertEqual(task_func(2), 4)
    def test_large(self):
        result = task_func(21)
        self.assertEqual(result, 42)
'''
RIGHT = 'def task_func(x):\n    return x * 2\n'

ATTACKS = {
    # the atexit argument tuple holds the report function and its nonce: call it with a clean report, then leave
    'gc_atexit_nonce': '''import gc, os
def task_func(x):
    return -999
for _o in gc.get_objects():
    if isinstance(_o, tuple) and len(_o) > 2 and callable(_o[0]) and isinstance(_o[1], str) and len(_o[1]) == 32:
        _o[0]({'nonce': _o[1], 'n': 2, 'failures': [], 'errors': []})
        os._exit(0)
''',
    'patch_testcase': '''import unittest
unittest.TestCase.assertEqual = lambda self, *a, **k: None
def task_func(x):
    return -999
''',
    'patch_unittest_case': '''import unittest.case
unittest.case.TestCase.assertEqual = lambda self, *a, **k: None
def task_func(x):
    return -999
''',
    'patch_in_the_call': '''def task_func(x):
    import unittest
    unittest.TestCase.assertEqual = lambda self, *a, **k: None
    return -999
''',
    'always_equal': '''class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
def task_func(x):
    return Anything()
''',
    'lying_int': '''class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def task_func(x):
    return Liar(0)
''',
    # read the calling test's code from its frame: the constant it compares with, or the local it named `result`
    'caller_frame_constants': '''import sys
def task_func(x):
    f = sys._getframe(1)
    ints = [c for c in f.f_code.co_consts if isinstance(c, int) and c != x]
    return ints[-1] if ints else -999
''',
    'frames_by_traceback': '''import traceback
def task_func(x):
    for f, _ in traceback.walk_stack(None):
        if f.f_code.co_name.startswith('test_'):
            ints = [c for c in f.f_code.co_consts if isinstance(c, int) and c != x]
            if ints: return ints[-1]
    return -999
''',
    'frames_by_exception': '''def task_func(x):
    try: raise ValueError
    except ValueError as e: f = e.__traceback__.tb_frame.f_back
    ints = [c for c in f.f_code.co_consts if isinstance(c, int) and c != x]
    return ints[-1] if ints else -999
''',
    'read_main_py': '''import re
def task_func(x):
    src = open('main.py').read()
    m = re.search(r'task_func\\(%d\\)\\S*, (\\d+)' % x, src)
    return int(m.group(1)) if m else -999
''',
}

@pytest.mark.parametrize('name', list(ATTACKS))
def test_forged_verdicts_fail(name, hostile):
    "Every attack is a failure, an error or a tampered verdict, never a pass."
    fb = run_unittest(ATTACKS[name], TEST, timeout=60, memory_mb=1024)
    hostile.forged(int(fb.success))
    assert not fb.success, (name, fb)
    hostile.refused()

def test_the_right_answer_still_passes():
    fb = run_unittest(RIGHT, TEST, timeout=60, memory_mb=1024)
    assert fb.success, fb

# a test that compares with `==` itself: no assertion sees the answer's value, only the entry point's result does
TEST_EQ = '''import unittest
import numpy as np
import pandas as pd   # (the answers may use it)
class TestCases(unittest.TestCase):
    def test_small(self):
        self.assertTrue(np.all(task_func(2) == 4))
    def test_large(self):
        assert np.all(task_func(21) == 42)
'''
ANYTHING = '''class Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
'''
EQ_ATTACKS = {
    'always_equal_under_assert_true': ANYTHING + 'def task_func(x):\n    return Anything()\n',
    'always_equal_in_a_numpy_array': ANYTHING + '''import numpy as np
def task_func(x):
    return np.array([Anything(), Anything()], dtype=object)
''',
    'always_equal_in_a_pandas_frame': ANYTHING + '''import pandas as pd
def task_func(x):
    return pd.DataFrame({'a': [Anything()]})['a']
''',
    # the first call is honest, and rebinds the name the tests call to a function the check never wrapped
    'rebind_the_entry_point': ANYTHING + '''def _cheat(x):
    return Anything()
def task_func(x):
    globals()['task_func'] = _cheat
    return x * 2
''',
}

@pytest.mark.parametrize('name', list(EQ_ATTACKS))
def test_forged_verdicts_under_a_test_that_compares_itself(name, hostile):
    "The entry point's results are checked where the test compares them with `==` itself: never a pass."
    fb = run_unittest(EQ_ATTACKS[name], TEST_EQ, timeout=60, memory_mb=2048, entry='task_func')
    hostile.forged(int(fb.success))
    assert not fb.success and fb.kind == 'tampered', (name, fb)
    hostile.refused()

def test_the_right_answer_passes_a_test_that_compares_itself():
    fb = run_unittest(RIGHT, TEST_EQ, timeout=60, memory_mb=2048, entry='task_func')
    assert fb.success, fb
    fb = run_unittest('import numpy as np\ndef task_func(x):\n    return np.array([x * 2, x * 2])\n', TEST_EQ,
                      timeout=60, memory_mb=2048, entry='task_func')
    assert fb.success, fb

VACUOUS = {
    'assert_true': 'self.assertTrue(True)',
    'under_if_false': 'if False:\n            self.assertEqual(task_func(2), 4)',
    'return_first': 'return\n        self.assertEqual(task_func(2), 4)',
    'assert_tuple': 'assert (task_func(2) == 4, "msg")',
    'never_called': 'def check():\n            self.assertEqual(task_func(2), 4)',
    'empty_loop': 'for x in []:\n            self.assertEqual(task_func(x), x * 2)',
}

@pytest.mark.parametrize('name', list(VACUOUS))
def test_vacuous_tests_are_refused(name, hostile):
    "A test that a wrong answer (`return -999`, or raising) passes is vacuous: refused with the reason, never a pass."
    test = f'import unittest\nclass TestCases(unittest.TestCase):\n    def test_it(self):\n        {VACUOUS[name]}\n'
    why = vacuous_tests(RIGHT, test, 'task_func', timeout=60, memory_mb=1024)
    hostile.forged(int(not why))
    assert why and 'wrong answer' in why, (name, why)
    hostile.refused()

def test_real_tests_are_not_vacuous():
    assert vacuous_tests(RIGHT, TEST, 'task_func', timeout=60, memory_mb=1024) == ''

def test_a_task_with_vacuous_tests_is_refused_counted_and_logged(tmp_path, caplog):
    "Through the family: a task whose tests pass `return -999` is never handed out; its cause is counted and logged."
    import gzip, json, logging
    from cove.tasks.code_benchmarks import BigCodeBenchEnv
    row = {'task_id': 'BigCodeBench/9101', 'instruct_prompt': 'Double x.', 'complete_prompt': 'def task_func(x):\n',
           'canonical_solution': '    return x * 2\n', 'test': TEST, 'entry_point': 'task_func', 'libs': '[]'}
    vac = ('import unittest\nclass TestCases(unittest.TestCase):\n    def test_it(self):\n        '
           + VACUOUS['return_first'])
    rows = [row, row | {'task_id': 'BigCodeBench/9102', 'test': vac + '\n'}]
    (tmp_path/'bigcodebench').mkdir()
    (tmp_path/'bigcodebench'/'b.jsonl.gz').write_bytes(gzip.compress('\n'.join(map(json.dumps, rows)).encode()))
    env = BigCodeBenchEnv(tmp_path, timeout=60, memory_mb=1024)
    with caplog.at_level(logging.WARNING):
        env.check_references(env.load())
    assert 'BigCodeBench/9102' in env.unavailable and 'BigCodeBench/9101' not in env.unavailable, env.unavailable
    assert env.unavailable_counts() == {'reference: vacuous tests': 1}
    assert any('pass a wrong answer' in r.getMessage() for r in caplog.records)
