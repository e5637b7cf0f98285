"""Package-level tests of the `multihop` family: HotpotQA metrics, the embedded generator, the HotpotQA loader and the
oracle."""
import json
from collections import Counter
from pathlib import Path

import pytest

from cove.core import Feedback, Task
from cove.tasks.base import EpisodeState, DataUnavailable, make_env
from cove.tasks.multihop import (normalize_answer, answer_em, answer_f1, qa_feedback, check_gold, dataset_dir,
                                 hash_split, fit_context, parse_hotpot_row, make_multihop_task, MultihopEnv,
                                 HotpotQAEnv)


def episode(env, task, action):
    st = env.reset(task)
    env.step(st, action)
    return env.evaluate(st)


def real_env():
    env = HotpotQAEnv()
    ok, why = env.available()
    if not ok: pytest.skip(f'HotpotQA data absent (/work/shared/datasets/hotpotqa or $COVE_DATA_DIR): {why}')
    return env


# ---- metrics and feedback -------------------------------------------------------------------

@pytest.mark.parametrize('pred,gold,em,f1', [
    ('The Beatles', 'Beatles', True, 1.0),
    ('kansas song!', 'Kansas Song', True, 1.0),
    ('Kansas City Song', 'Kansas Song', False, 0.8),
    ('yes', 'no', False, 0.0),
    ('no it is not', 'no', False, 0.0),       # yes/no get no partial credit (official rule)
    ('Paris', 'London', False, 0.0),
    ('an apple a day', 'apple day', True, 1.0),
])
def test_official_metrics(pred, gold, em, f1):
    assert answer_em(pred, gold) is em
    assert answer_f1(pred, gold) == pytest.approx(f1)


def test_normalize_answer():
    assert normalize_answer('  The  "Quick", Brown-Fox. ') == 'quick brownfox'


def test_feedback_messages():
    t = Task('x', 'multihop', 'test', 'q', target='Kansas Song')
    env = MultihopEnv()
    assert episode(env, t, 'Reasoning...\nAnswer: the Kansas Song.') == Feedback('success', 1.0, 'correct')
    fb = episode(env, t, 'Answer: Kansas City Song')
    assert (fb.status, fb.message) == ('failure',
                                       "wrong answer: got 'Kansas City Song', expected 'Kansas Song' (F1 0.80)")
    assert fb.score == pytest.approx(0.8)
    assert episode(env, t, 'Kansas Song') == Feedback('failure', 0.0, "format: no 'Answer:' line", 'format')
    assert env.evaluate(env.reset(t)) == Feedback('failure', 0.0, 'no final answer within 1 turn(s)', 'no_answer')
    assert len(episode(env, t, 'Answer: ' + 'x' * 500).message) < 200


# ---- embedded generator ---------------------------------------------------------------------

def test_generator_deterministic_and_disjoint():
    a, b = MultihopEnv(), MultihopEnv()
    tr = a.tasks('train', 200)
    assert tr == b.tasks('train', 200)
    assert a.tasks('train', 10) == tr[:10]
    assert a.tasks('train', 10, seed=1) != tr[:10]
    te = a.tasks('test', 200)
    assert not {t.payload['question'] for t in tr} & {t.payload['question'] for t in te}
    assert all(hash_split(t.payload['question']) == t.split for t in tr + te)
    assert len({t.id for t in tr + te}) == 400
    assert len(a.tasks('test')) == MultihopEnv.sizes['test']
    with pytest.raises(ValueError, match='no split'): a.tasks('dev')


def test_generator_structure():
    ts = MultihopEnv().tasks('train', 300)
    kinds = Counter(t.meta['template'] for t in ts)
    assert len(kinds) == 7 and min(kinds.values()) > 10
    assert Counter(t.meta['type'] for t in ts).keys() == {'bridge', 'comparison'}
    for t in ts:
        titles = [x for x, _ in t.payload['paragraphs']]
        assert 4 <= len(titles) <= 6 and len(set(titles)) == len(titles)
        assert set(t.meta['supporting']) <= set(titles)
        text = ' '.join(x for _, x in t.payload['paragraphs'])
        if t.meta['template'] == 'same_river': assert t.target in ('yes', 'no')
        else: assert t.target in text or t.target in titles   # the answer is stated in the context
        assert t.prompt.endswith('Question: ' + t.payload['question'])
        assert Task(**json.loads(json.dumps(t.to_dict()))) == t
    same = [t for t in ts if t.meta['template'] == 'same_river']
    assert {t.target for t in same} == {'yes', 'no'}


def test_embedded_oracle_all_accepted():
    env = make_env('multihop')
    ts = env.tasks('train', 200) + env.tasks('test', 200)
    acc, rej = check_gold(env, ts)
    assert rej == [] and len(acc) == 400
    wrong = [episode(env, t, 'Answer: Nowhere') for t in ts]
    assert not any(f.success for f in wrong)


# ---- HotpotQA loader ------------------------------------------------------------------------

ROW = dict(_id='abc', question='Who founded Zorvex Labs?', answer='Mira Talsen', type='bridge', level='hard',
           supporting_facts=[['Zorvex Labs', 0]],
           context=[['Zorvex Labs', ['Zorvex Labs was founded by Mira Talsen.', ' It makes lamps.']],
                    ['Other', ['Something else.']]])


def test_fit_context_cap():
    ctx = [[f'T{i}', [f' Sentence {j} of paragraph {i} is here.' for j in range(6)]] for i in range(10)]
    ps, k, cut = fit_context(ctx, 1000)
    assert cut and k is not None and [t for t, _ in ps] == [t for t, _ in ctx]
    assert sum(len(t) + len(x) + 4 for t, x in ps) <= 1000
    assert fit_context(ctx, None)[2] is False
    ps, k, cut = fit_context([['A', ['x' * 500]], ['B', ['y' * 500]]], 200)
    assert (k, cut) == (1, True) and all(x.endswith('…') for _, x in ps)


def test_parse_row_and_support_flags():
    t = parse_hotpot_row(ROW)
    assert (t.target, t.meta['support_in_context'], t.meta['support_kept'],
            t.meta['reference']) == ('Mira Talsen', True, True, 'Answer: Mira Talsen')
    t = parse_hotpot_row(ROW, max_chars=60)   # only the first sentence of each paragraph survives
    assert t.meta['truncated'] and t.meta['support_kept']
    t = parse_hotpot_row({**ROW, 'supporting_facts': [['Missing', 0]]})
    assert (t.meta['support_in_context'], t.meta['support_kept']) == (False, False)


def test_loader_fixture_counts_malformed(tmp_path):
    d = tmp_path/'hotpotqa'; d.mkdir()
    rows = [json.dumps(ROW), '{"_id": "broken', json.dumps({**ROW, '_id': 'z', 'context': []}),
            json.dumps({k: v for k, v in ROW.items() if k != 'answer'}), json.dumps({**ROW, '_id': 'w'})]
    (d/'dev.jsonl').write_text('\n'.join(rows) + '\n')
    env = make_env('multihop:hotpotqa', data_dir=tmp_path)
    ts = env.tasks('all')
    assert [t.id for t in ts] == ['hotpotqa-abc', 'hotpotqa-w']
    assert (env.report.n_ok, env.report.n_bad) == (2, 3)
    assert ('bad JSON' in env.report.errors[0] and 'no context' in env.report.errors[1]
            and 'KeyError' in env.report.errors[2])
    assert sorted(t.id for t in env.tasks('train') + env.tasks('test')) == sorted(t.id for t in ts)
    assert env.tasks('all', 1, seed=0) == env.tasks('all', 1, seed=0)
    assert HotpotQAEnv(data_dir=d).tasks('all') == ts    # the folder itself works too


def test_loader_missing_data(tmp_path):
    with pytest.raises(DataUnavailable, match='not found'): HotpotQAEnv(data_dir=tmp_path).tasks()
    assert HotpotQAEnv(data_dir=tmp_path).available()[0] is False
    (tmp_path/'hotpotqa').mkdir()
    with pytest.raises(DataUnavailable, match='no \\*.jsonl'): HotpotQAEnv(data_dir=tmp_path).tasks()
    with pytest.raises(DataUnavailable): dataset_dir('gsm8k', tmp_path)


# ---- HotpotQA real data (skips when absent) -------------------------------------------------

def test_hotpotqa_real_oracle():
    env = real_env()
    ts = env.tasks('all')
    rep = env.report
    print(f'\n{rep}; errors: {rep.errors}')
    assert rep.n_ok + rep.n_bad == 250 and rep.n_ok >= 240
    assert all('no context' in e for e in rep.errors)       # the only malformed rows: empty contexts
    tr, te = env.tasks('train'), env.tasks('test')
    assert len(tr) + len(te) == len(ts) and not {t.id for t in tr} & {t.id for t in te}
    acc, rej = check_gold(env, ts)
    print(f'HotpotQA oracle: {len(acc)} accepted, {len(rej)} rejected: {rej[:10]}')
    assert rej == []
    stats = Counter(k for t in ts for k in ('truncated', 'support_in_context', 'support_kept') if t.meta[k])
    print('context stats:', dict(stats))
    assert all(len(t.prompt) <= env.max_chars + len(t.payload['question']) + 20 for t in ts)
    assert stats['support_kept'] <= stats['support_in_context']
    fb = episode(env, te[0], 'Answer: certainly not this')
    assert fb.status == 'failure' and fb.message.startswith('wrong answer')
