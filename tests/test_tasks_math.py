"""Package-level tests of the `math` family: answer extraction and equivalence, the arithmetic generator, the GSM8K and
MATH loaders, and the oracle over the real data."""
import json, re
from collections import Counter

import pytest

from cove.core import Feedback, Task
from cove.tasks.base import DataUnavailable, make_env
from cove.tasks.multihop import check_gold
from cove.tasks.math import (extract_math_answer, strip_math, math_equiv, numbers_equal, numeric_answer, to_number,
                             gsm8k_reference, ARITH_TEMPLATES, ArithmeticEnv, GSM8KEnv, MATHEnv)


def episode(env, task, action):
    st = env.reset(task)
    env.step(st, action)
    return env.evaluate(st)


def real_env(cls):
    env = cls()
    ok, why = env.available()
    if not ok: pytest.skip(f'{cls.sub} data absent (/work/shared/datasets/{cls.sub} or $COVE_DATA_DIR): {why}')
    return env


# ---- extraction and equivalence -------------------------------------------------------------

@pytest.mark.parametrize('text,ans', [
    ('so $x = \\boxed{\\frac{1}{2}}$.', '\\frac{1}{2}'),
    ('\\boxed{3} wait, \\boxed{\\sqrt{2}}', '\\sqrt{2}'),
    ('Steps.\nAnswer: 5', '5'),
    ('Answer: $\\boxed{7}$', '7'),
    ('**Final answer:** 12', '12'),
    ('no answer here', None),
])
def test_extract(text, ans):
    assert extract_math_answer(text) == ans


EQUIV = [  # (pred, gold): documented equivalences
    ('\\frac{1}{2}', '0.5'), ('1/2', '\\frac{1}{2}'), ('0.5', '1/2'), ('\\frac12', '\\frac{1}{2}'),
    ('\\dfrac{3}{4}', '\\frac34'), ('\\tfrac{3}{4}', '0.75'), ('\\tfrac{41}2', '20.5'),
    ('10\\%', '10'), ('10%', '10'),                 # a percent sign is dropped (Hendrycks), so 10% == 10
    ('1,000', '1000'), ('1{,}000', '1000'), ('10,\\!000', '10000'),
    ('5\\text{ cm}', '5'), ('5 \\text{ cm}^2', '5'), ('7\\text{ hours}.', '7'), ('14 inches', '14'),
    ('$42$', '42'), ('\\$3.50', '3.5'), ('90^\\circ', '90'), ('x = 4', '4'), ('k=\\frac{-33}{2}', '-\\frac{33}{2}'),
    ('\\left(1, 2\\right)', '(1,2)'), ('(1, 2)', '(1,2)'), ('3, -2', '-2,3'), ('\\sqrt 3', '\\sqrt{3}'),
    ('\\text{(E)}', 'E'), ('friday', '\\text{Friday}'), ('2\\frac{1}{2}', '\\frac{5}{2}'),
    ('0.3333333', '\\frac{1}{3}'), ('.5', '0.5'), ('-\\frac{5}{3}', '\\frac{-5}{3}'),
    ('2, 3, \\text{ and } 4', '2,3,4'),
]
NOT_EQUIV = [
    ('12', '13'), ('0.33', '\\frac{1}{3}'), ('10\\%', '0.1'), ('1000001', '1000000'), ('(1,2)', '(2,1)'),
    ('[1,2]', '(1,2)'), ('2\\sqrt{3}', '\\sqrt{12}'), ('x+1', 'x-1'), ('', '0'), (None, '1'), ('\\frac{1}{0}', '0'),
]


@pytest.mark.parametrize('pred,gold', EQUIV)
def test_equiv(pred, gold):
    assert math_equiv(pred, gold) and math_equiv(gold, pred)


@pytest.mark.parametrize('pred,gold', NOT_EQUIV)
def test_not_equiv(pred, gold):
    assert not math_equiv(pred, gold)


def test_numbers():
    assert [to_number(s) for s in ('7', '-0.25', '\\frac{3}{4}', '\\pi', '1_0')] == [7, -0.25, 0.75, None, None]
    assert numbers_equal('0.3333333', '\\frac{1}{3}') and not numbers_equal('0.333', '\\frac{1}{3}')
    assert [numeric_answer(s) for s in ('$1,080', '18 dollars', '6 * 3 = 18', 'twelve')] == ['1080', '18', '18', None]


def test_feedback_messages():
    t = Task('x', 'math', 'test', 'q', target='13')
    env = ArithmeticEnv()
    assert episode(env, t, '6 + 7 = 13\nAnswer: 13') == Feedback('success', 1.0, 'correct')
    assert episode(env, t, 'Answer: 13 apples') == Feedback('success', 1.0, 'correct')
    assert episode(env, t, 'Answer: 12').message == "wrong answer: got '12', expected '13'"
    assert episode(env, t, 'Answer: thirteen').message == "format: no number in the answer 'thirteen'"
    assert episode(env, t, 'it is 13').message == 'format: no Answer line or \\boxed{}'
    assert env.evaluate(env.reset(t)).message == 'no final answer within 1 turn(s)'
    m = Task('y', 'math', 'test', 'q', target='\\frac{1}{2}')
    assert episode(MATHEnv(), m, 'Thus $\\boxed{0.5}$').success
    assert episode(MATHEnv(), m, 'Answer: 1/3').message == "wrong answer: got '1/3', expected '\\\\frac{1}{2}'"


# ---- embedded arithmetic --------------------------------------------------------------------

def test_arith_templates_are_correct():
    import random
    r = random.Random(0)
    for name, f in ARITH_TEMPLATES.items():
        for _ in range(200):
            q, steps, ans = f(r)
            assert isinstance(ans, int) and ans > 0 and 2 <= len(steps) <= 4, (name, q)
            assert f'= {ans}' in steps[-1]
            for st in steps:   # each worked step is arithmetically right
                lhs, rhs = re.search(r'([\d ]+(?:[-*+/] *[\d ]+)+)= (\d+)', st).groups()
                assert eval(lhs) == int(rhs), (name, st)


def test_arith_deterministic_and_disjoint():
    env = make_env('math')
    tr, te = env.tasks('train', 200), env.tasks('test', 200)
    assert tr == ArithmeticEnv().tasks('train', 200) and env.tasks('train', 7) == tr[:7]
    assert env.tasks('train', 5, seed=3) != tr[:5]
    assert not {t.prompt for t in tr} & {t.prompt for t in te}
    assert (Counter(t.meta['steps'] for t in tr).keys() <= {2, 3, 4}
            and len(Counter(t.meta['template'] for t in tr)) == 8)
    assert all(t.meta['reference'].endswith(f'Answer: {t.target}') for t in tr)
    assert Task(**json.loads(json.dumps(tr[0].to_dict()))) == tr[0]


def test_arith_oracle_all_accepted():
    env = ArithmeticEnv()
    ts = env.tasks('train', 200) + env.tasks('test', 200)
    acc, rej = check_gold(env, ts)
    assert rej == [] and len(acc) == 400
    assert not any(episode(env, t, f'Answer: {int(t.target) + 1}').success for t in ts)


# ---- loaders on synthetic fixtures ----------------------------------------------------------

def test_gsm8k_reference():
    assert gsm8k_reference('She sold 48/2 = <<48/2=24>>24 clips.\n#### 1,024') == ('She sold 48/2 = 24 clips.\n'
                                                                                   'Answer: 1024', '1024')
    with pytest.raises(ValueError, match='no numeric final answer'): gsm8k_reference('#### five')
    with pytest.raises(ValueError, match='no numeric final answer'): gsm8k_reference('no marker')


def test_gsm8k_loader_fixture(tmp_path):
    d = tmp_path/'gsm8k'; d.mkdir()
    rows = [json.dumps(dict(question='What is 2 + 3?', answer='2 + 3 = <<2+3=5>>5\n#### 5')), '{"question": oops',
            json.dumps(dict(question='Q?')), json.dumps(dict(question='Q?', answer='#### five')), '',
            json.dumps(dict(question='How many?', answer='#### 1,200'))]
    (d/'train.jsonl').write_text('\n'.join(rows) + '\n')
    env = make_env('math:gsm8k', data_dir=tmp_path)
    ts = env.tasks('all')
    assert [(t.target, t.meta['reference']) for t in ts] == [('5', '2 + 3 = 5\nAnswer: 5'), ('1200', 'Answer: 1200')]
    assert (env.report.n_ok, env.report.n_bad) == (2, 3)
    assert check_gold(env, ts) == ([t.id for t in ts], [])


def test_math_loader_fixture(tmp_path):
    d = tmp_path/'math'; d.mkdir()
    rows = [dict(problem='Compute $1/2+1/4$.', answer='\\frac34', difficulty=1.0, type='Algebra'),
            dict(problem='Find $x$.', answer=None), dict(problem='Find $y$.', answer=''), 'not a row',
            dict(problem='Length?', answer='5\\text{ cm}', difficulty=2.0, type='Geometry')]
    (d/'train.json').write_text(json.dumps(rows))
    env = MATHEnv(data_dir=tmp_path)
    ts = env.tasks('all')
    assert [t.id for t in ts] == ['math-00000', 'math-00004'] and (env.report.n_ok, env.report.n_bad) == (2, 3)
    assert env.report.errors[0] == 'train.json[1]: ValueError: no answer'
    assert episode(env, ts[0], 'So $\\boxed{0.75}$.').success and episode(env, ts[1], 'Answer: 5').success
    (d/'train.json').write_text('{"not": "a list"}')
    with pytest.raises(ValueError, match='JSON list'): MATHEnv(data_dir=tmp_path).tasks()


def test_missing_data(tmp_path):
    for cls in (GSM8KEnv, MATHEnv):
        assert cls(data_dir=tmp_path).available()[0] is False
        with pytest.raises(DataUnavailable, match='not found'): cls(data_dir=tmp_path).tasks()
        (tmp_path/cls.sub).mkdir()
        with pytest.raises(DataUnavailable, match='no train'): cls(data_dir=tmp_path).tasks()


# ---- the real data (skips when absent) ------------------------------------------------------

def test_gsm8k_real_oracle_all_rows():
    env = real_env(GSM8KEnv)
    ts = env.tasks('all')
    print(f'\n{env.report}; errors: {env.report.errors}')
    assert env.report.n_ok == 7473 and env.report.n_bad == 0
    tr, te = env.tasks('train'), env.tasks('test')
    assert len(tr) + len(te) == len(ts) and 0.15 < len(te) / len(ts) < 0.25
    acc, rej = check_gold(env, ts)
    print(f'GSM8K oracle: {len(acc)} accepted, {len(rej)} rejected: {rej[:10]}')
    assert rej == []
    assert not any('<<' in t.meta['reference'] for t in ts)
    assert sum(episode(env, t, f'Answer: {int(t.target) + 1}').success for t in ts) == 0


def test_math_real_oracle_all_rows():
    env = real_env(MATHEnv)
    ts = env.tasks('all')
    print(f'\n{env.report}; errors: {env.report.errors}')
    assert env.report.n_ok + env.report.n_bad == 7474
    assert all('no answer' in e for e in env.report.errors)   # the only malformed rows lack an answer
    acc, rej = check_gold(env, ts)
    print(f'MATH oracle (Answer: line): {len(acc)} accepted, {len(rej)} rejected: {rej[:10]}')
    assert rej == []
    boxed = [t.id for t in ts if not episode(env, t, f'The answer is $\\boxed{{{t.target}}}$.').success]
    print(f'MATH oracle (\\boxed{{}}): {len(ts) - len(boxed)} accepted, {len(boxed)} rejected: {boxed[:10]}')
    assert boxed == []
    assert [t.target for t in ts if not math_equiv(strip_math(t.target), t.target)] == []   # normalisation is stable
    # a neighbour's gold answer is accepted only when it normalises to the same string
    wrong = [(a.target, b.target) for a, b in zip(ts, ts[1:])
             if episode(env, a, f'Answer: {b.target}').success and strip_math(a.target) != strip_math(b.target)]
    assert wrong == []
