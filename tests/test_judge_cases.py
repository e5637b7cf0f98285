"""The judge roles' hand-labelled case sets and few-shot prompts (issue 11, item 5): at least thirty cases per role with
gold among the options, few-shot templates that keep the single `{content}` slot and calibrate on the same examples, and
worked examples that share no text with the measurement cases."""
import pytest
from collections import Counter
from cove.judge import Judge, few_shot, fill, CONTENT_FREE
from cove.router import (CHANNELS, ROUTING_CASES, ROUTE_SHOTS, ROUTE_TEMPLATE, Router, clip, route_template,
                         routing_judge_cases, router_agreement)
from cove.knowledgepo import (KB_OP_CASES, KB_OP_PROMPT, KB_OP_SHOTS, KB_OPS, VOLATILITY_CASES, VOLATILITY_PROMPT,
                              VOLATILITY_SHOTS, Candidate, kb_op_content, kb_op_prompt, kb_op_agreement,
                              label_candidate, volatility_agreement, volatility_prompt)
from cove.store import LABELS

ROLES = {  # role: (zero-shot template, few-shot template builder, number of shots, cases as (texts, gold), options)
    'routing': (ROUTE_TEMPLATE, route_template, len(ROUTE_SHOTS),
                [((c['task'].prompt,), c['gold']) for c in ROUTING_CASES], CHANNELS),
    'volatility': (VOLATILITY_PROMPT, volatility_prompt, len(VOLATILITY_SHOTS),
                   [((t,), g) for t, g in VOLATILITY_CASES], LABELS),
    'kb_op': (KB_OP_PROMPT, kb_op_prompt, len(KB_OP_SHOTS), [((a, b), g) for a, b, g in KB_OP_CASES], KB_OPS[:3]),
}
SHOT_TEXTS = {'routing': [c['task'].prompt for c in ROUTE_SHOTS], 'volatility': [t for t, _ in VOLATILITY_SHOTS],
              'kb_op': [t for a, b, _ in KB_OP_SHOTS for t in (a, b)]}
SHOT_GOLDS = {'routing': [c['gold'] for c in ROUTE_SHOTS], 'volatility': [g for _, g in VOLATILITY_SHOTS],
              'kb_op': [g for *_, g in KB_OP_SHOTS]}


@pytest.mark.parametrize('role', list(ROLES))
def test_case_sets_have_thirty_balanced_cases_with_gold_among_options(role):
    _, _, _, cases, options = ROLES[role]
    golds = [g for _, g in cases]
    assert len(cases) >= 30 and set(golds) <= set(options)
    assert set(Counter(golds).values()) == {len(cases) // len(options)}          # balanced: majority rate = 1/3
    assert len({texts for texts, _ in cases}) == len(cases)                      # no case twice


@pytest.mark.parametrize('role', list(ROLES))
def test_few_shot_templates_keep_the_content_slot(role):
    zero, build, n, _, options = ROLES[role]
    assert build(0) == zero
    for k in range(1, n + 1):
        t = build(k)
        assert t.count('{content}') == 1 and t.count('\nAnswer: ') == k
        # the case comes after every worked example
        assert fill(t, 'THE CASE').index('THE CASE') > t.rindex('Answer: ')
    assert set(SHOT_GOLDS[role]) == set(options) and 2 <= n <= 8
    with pytest.raises(ValueError, match='must be in'): build(n + 1)


@pytest.mark.parametrize('role', list(ROLES))
def test_worked_examples_share_no_text_with_the_measurement_cases(role):
    _, build, n, cases, _ = ROLES[role]
    prompt, case_texts = build(n), {t for texts, _ in cases for t in texts}
    assert not [t for t in case_texts if clip(t, 400) in prompt or t in prompt]
    assert not case_texts & set(SHOT_TEXTS[role])


def test_few_shot_rejects_bad_templates():
    with pytest.raises(ValueError, match='exactly one'): few_shot('no slot', [('a', 'b')])
    with pytest.raises(ValueError, match='exactly one'): few_shot('{content} and {content}', [('a', 'b')])
    assert few_shot('X: {content}', []) == 'X: {content}'
    assert few_shot('Rules.\nX: {content}\nPick.',
                    [('one', 'a')]) == ('Rules.\nWorked examples:\n\nX: one\nAnswer: a\n\nNow the case to decide:\n'
                                        'X: {content}\nPick.')


@pytest.fixture(scope='module')
def tiny_judge():
    from cove.llm import HFPolicy, tiny_llama
    return Judge(HFPolicy(*tiny_llama(), name='tiny'))


def test_few_shot_roles_calibrate_on_the_same_examples(tiny_judge):
    "Each role's few-shot prompt is the one scored, and its content-free prompt is the same template filled with N/A."
    j = tiny_judge
    ag = router_agreement(Router(j, explain=False, shots=6), ROUTING_CASES[:2])
    assert ag['n'] == 2 and ag['raw']['n'] == 2 and len(ag['ci']) == 2
    assert j.log[-1]['prompt'] == fill(route_template(6), routing_judge_cases(ROUTING_CASES[1:2])[0]['content'])
    assert j.log[-1]['content_free_prompt'] == fill(route_template(6), CONTENT_FREE)
    label_candidate(j, Candidate('memory', 'Check the units first.', origin='judge'), 'judge', shots=6)
    assert j.log[-1]['content_free_prompt'] == fill(volatility_prompt(6), CONTENT_FREE)
    assert kb_op_agreement(j, KB_OP_CASES[:2], shots=6)['n'] == 2
    assert j.log[-1]['prompt'] == fill(kb_op_prompt(6), kb_op_content(*KB_OP_CASES[1][:2]))
    va = volatility_agreement(j, VOLATILITY_CASES[:3], shots=4)
    assert va['judge']['n'] == 3 and j.log[-1]['prompt'].startswith(volatility_prompt(4).split('{content}')[0])
