"""The feedback contract (issue 26 item 3): every built-in evaluator sets a documented `kind`, records carry it, a
record without one still reads, and KnowledgePO picks its hints by the kind (and the family's own wording), never by
the message."""
import ast, inspect, json
import pytest
import cove.knowledgepo
from cove.core import Feedback, FEEDBACK_KINDS, Task, append_jsonl
from cove.tasks.base import EpisodeResult, replay_reference
from cove.knowledgepo import FEEDBACK_HINTS, NO_CALL_HINT, hint_for, rule_candidates
from cove.tasks.base import ANSWER_HINT, FAMILIES, Environment, EpisodeState, family_hints, make_env, register_env
from cove.tasks.tableqa import EmbeddedTableQA, replay


def test_default_kind_by_status_and_checks():
    assert [Feedback(s, 0.0).kind for s in ('success', 'failure', 'error', 'timeout')] == ['ok', '', '', 'timeout']
    assert Feedback('success', 1.0, 'correct') == Feedback('success', 1.0, 'correct', 'ok')
    with pytest.raises(ValueError, match='not in'): Feedback('failure', 0.0, 'x', 'wrong')
    with pytest.raises(ValueError, match="goes with status 'success'"): Feedback('success', 1.0, 'x', 'wrong_answer')
    with pytest.raises(ValueError, match="goes with status 'success'"): Feedback('error', 0.0, 'x', 'ok')


EPISODES = {   # family -> actions of failed episodes, and the kind each must get
    'tableqa': [(['Answer: nope'], 'wrong_answer'), (['I think 3.'], 'format'),
                (['Action: nosuchtool(1)', 'Answer: 0'], 'tool_error')],
    'multihop': [(['Answer: zebra'], 'wrong_answer'), (['no idea'], 'format'), ([], 'no_answer')],
    'math': [(['Answer: 12345'], 'wrong_answer'), (['Answer: lots'], 'format'), ([], 'no_answer')],
    'code': [(['```python\ndef oops(:\n```'], 'runtime_error'), ([], 'no_answer')],
}


@pytest.mark.parametrize('family', list(EPISODES))
def test_every_family_sets_its_kinds(family):
    env = make_env(family, **({'timeout': 2.0} if family == 'code' else {}))
    t = env.tasks('test', n=1, seed=2)[0]
    ref = replay_reference(env, t)
    assert (ref.feedback.status, ref.feedback.kind, ref.record()['kind']) == ('success', 'ok', 'ok')
    for turns, kind in EPISODES[family]:
        st, fb = replay(env, t, turns)
        assert not fb.success and fb.kind == kind and fb.kind in FEEDBACK_KINDS, (turns, fb)
        assert EpisodeResult(t, st, fb).record()['kind'] == kind


def test_code_test_failure_and_timeout_kinds():
    env = make_env('code', timeout=1.0)
    t = env.tasks('test', n=1, seed=2)[0]
    ep = t.payload['entry_point']
    assert replay(env, t, [f"```python\ndef {ep}(*a):\n    return None\n```"])[1].kind == 'test_failed'
    assert replay(env, t, [f"```python\ndef {ep}(*a):\n    while True: pass\n```"])[1].kind == 'timeout'


def test_a_record_without_a_kind_still_reads(tmp_path):
    from cove.stats import run_metrics
    from cove.check import episode_records_of
    p = tmp_path/'episodes.jsonl'
    old = dict(episode=0, epoch=0, method='base', family_spec='math', task_id='m-1', family='math', split='test',
               status='failure', success=False, score=0.0, message="wrong answer: got '1', expected '2'",
               prompt_tokens=3, completion_tokens=2, api_correct=None)   # written before feedback had a kind
    append_jsonl(p, old)
    append_jsonl(p, dict(old, episode=1, status='success', success=True, score=1.0, message='correct', kind='ok'))
    recs = episode_records_of(p)
    assert [r.get('kind') for r in recs] == [None, 'ok']
    assert run_metrics(recs)['overall']['n'] == 2


def test_hints_read_the_kind_never_the_message():
    env, t = EmbeddedTableQA(), EmbeddedTableQA().tasks('same', n=1, seed=1)[0]
    st = EpisodeState(t, actions=['Answer: 3'], answer='3', calls=[], done=True)
    lying = Feedback('failure', 0.0, "unknown tool 'count'; timeout; format: sorry", 'wrong_answer')   # text ignored
    hints = [c.content for c in rule_candidates(t, EpisodeResult(t, st, lying))]
    assert hints == [env.hints['no_tool_call'], env.hints['wrong_answer']]
    unclassified = Feedback('failure', 0.0, "wrong answer: got '3'")   # no kind: nothing to act on but the missing call
    assert [c.content for c in rule_candidates(t, EpisodeResult(t, st, unclassified))] == [env.hints['no_tool_call']]


def test_hint_wording_neutral_unless_the_family_words_it():
    assert 'column' in hint_for('tableqa', 'wrong_answer') and 'column' not in FEEDBACK_HINTS['wrong_answer']
    for fam in ('multihop', 'math', 'code'): assert hint_for(fam, 'wrong_answer') == FEEDBACK_HINTS['wrong_answer']
    fmt = [hint_for(f, 'format') for f in ('tableqa', 'math', 'multihop', 'code')]
    assert fmt == [ANSWER_HINT] * 3 + [FEEDBACK_HINTS['format']]
    assert hint_for('no_such_family', 'no_tool_call') == NO_CALL_HINT and family_hints('no_such_family') == {}
    assert set(FEEDBACK_HINTS) <= set(FEEDBACK_KINDS)


def test_a_family_supplies_its_own_hints():
    @register_env('units_fb')
    class Units(Environment):
        hints = {'wrong_answer': 'Convert to the asked unit before answering.', 'format': None}   # None: no hint
    try:
        t = Task('u-1', 'units_fb', 'test', 'How many metres is 2 km?', target='2000')
        wrong = EpisodeResult(t, EpisodeState(t, answer='2'), Feedback('failure', 0.0, 'got 2', 'wrong_answer'))
        assert [c.content for c in rule_candidates(t, wrong)] == ['Convert to the asked unit before answering.']
        fmt = EpisodeResult(t, EpisodeState(t), Feedback('failure', 0.0, 'no answer line', 'format'))
        assert rule_candidates(t, fmt) == []
        timeout = EpisodeResult(t, EpisodeState(t), Feedback('timeout', 0.0, 'too slow'))
        assert [c.content for c in rule_candidates(t, timeout)] == [FEEDBACK_HINTS['timeout']]   # the neutral one
    finally: del FAMILIES['units_fb']


def _message_matches(tree) -> list[int]:
    "Lines where a `.message` is searched, matched, split or tested for a substring."
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            on_message = isinstance(f.value, ast.Attribute) and f.value.attr == 'message'
            if on_message and f.attr in ('startswith', 'endswith', 'split', 'find', 'index', 'count'):
                out.append(node.lineno)
            if f.attr in ('search', 'match', 'fullmatch', 'findall', 'finditer', 'sub'):
                if any(isinstance(a, ast.Attribute) and a.attr == 'message' for a in node.args): out.append(node.lineno)
        if isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
            if any(isinstance(c, ast.Attribute) and c.attr == 'message' for c in node.comparators):
                out.append(node.lineno)
    return out


def test_no_knowledgepo_code_matches_feedback_message_text():
    assert _message_matches(ast.parse(inspect.getsource(cove.knowledgepo))) == []
    assert _message_matches(ast.parse("import re\nre.search('x', fb.message)\n'a' in r.feedback.message")) == [2, 3]
