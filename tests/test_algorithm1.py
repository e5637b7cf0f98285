"Issue 40: Algorithm 1 as the paper writes it. Each rule is pinned by a case that failed on the previous mechanism."
import tempfile
from pathlib import Path
from types import SimpleNamespace as NS
import numpy as np
import pytest
from cove.config import load_config
from cove.core import Task, Feedback
from cove.router import FeedbackRouter
from cove.spec import open_envs
from cove.store import KnowledgeBase, Entry
from cove.workflow import CoveMethod, ParametricOnly

CFG = dict(**{'model.name': 'tiny', 'train.reference_tasks': 4})

@pytest.fixture
def cove(tmp_path): return CoveMethod(load_config(overrides=CFG), tmp_path)

def _episode(family, tid, score=1.0):
    msgs = [dict(role='user', content=f'task {tid}'), dict(role='assistant', content='Answer: 4')]
    return NS(messages=msgs, feedback=NS(score=score), task=Task(tid, family, 'test', f'task {tid}'))

def test_harness_routed_episodes_never_train(cove):
    cove.keep_trajectory(_episode('math', 't1'), 'harness_only')
    cove.keep_trajectory(_episode('math', 't2'), 'parametric_candidate')
    cove.keep_trajectory(_episode('math', 't3'), 'hybrid')
    assert [t['task_id'] for t in cove.trajectories['math']] == ['t2', 't3']
    env = open_envs(['math'], cove.cfg)['math']
    data, counts = cove.update_rows(env, 'math').sft(memory_aware=False)
    assert sorted(data['task_id']) == ['t2', 't3']
    assert counts == {'parametric_candidate': 1, 'hybrid': 1, 'reference': 0, 'stale_dropped': 0}

def test_references_only_at_cold_start(cove):
    env = open_envs(['math'], cove.cfg)['math']
    cove.keep_trajectory(_episode('math', 't2'), 'parametric_candidate')
    assert cove.update_rows(env, 'math', cold=False).sft(memory_aware=False)[0].num_rows == 1
    data, counts = cove.update_rows(env, 'math', cold=True).sft(memory_aware=False)
    assert counts['reference'] >= 1 and data.num_rows == 1 + counts['reference']

def test_update_skipped_without_parametric_data(cove):
    "A trigger event with nothing routed to the weights trains nothing (and, not cold, adds no references)."
    cove.keep_trajectory(_episode('math', 't1'), 'harness_only')
    assert cove.parametric_update(None, 'math', cold=False) is None
    assert cove.updates[-1]['skipped'] == 'no parametric-routed trajectory to train on'

def test_parametric_only_keeps_every_success(tmp_path):
    m = ParametricOnly(load_config(overrides=CFG), tmp_path)
    assert m.router.name == 'fixed_parametric_candidate' and m.kb is None

def test_default_router_reads_feedback(cove):
    "The CPU default routes from feedback, with no model at all: an adapter cannot move it."
    assert isinstance(cove.router, FeedbackRouter) and cove.judge is None
    assert load_config()['router.judge'] is False

def test_base_weights_only_where_a_judge_scores(cove):
    "The feedback router reads no model: the adapter stays (a merged served adapter reloaded twice an episode before)."
    calls = []
    cove.policy = NS(active_adapter='adapter-0001', set_adapter=calls.append)
    assert isinstance(cove.router, FeedbackRouter)
    with cove.base_weights(): pass
    assert calls == []
    cove.router = NS(judge=object())   # the constrained LLM judge (router.judge=true) scores on the base weights
    with cove.base_weights(): assert calls == [None]
    assert calls == [None, 'adapter-0001']

def test_no_self_and_no_cross_family_retrieval():
    kb = KnowledgeBase(dim=2)
    kb.insert_many([Entry('solved example of train-1', 'memory', 'stable', family='math', source_task='train-1',
                          embedding=[1, 0]),
                    Entry('a tableqa lesson', 'memory', 'stable', family='tableqa', source_task='tq-1',
                          embedding=[1, 0.01])])
    from cove.agent import HarnessAgent
    agent = HarnessAgent(NS(), kb=kb, k=3, mode='dense', scope=True)
    kb.embedder = NS(encode=lambda q: np.array([[1, 0]], np.float32))
    assert agent.retrieve(Task('train-1', 'math', 'train', 'q')) == []           # its own entry: never
    assert [e.content for e in agent.retrieve(Task('train-2', 'math', 'train', 'q'))] == ['solved example of train-1']
    assert agent.retrieve(Task('c-1', 'code', 'test', 'q')) == []                 # code has none of its own

def test_memory_is_not_remapped_from_the_environment(cove):
    "Issue 53 item 1: entries reach the prompt as stored; no method re-maps names from the environment's surfaces."
    assert not hasattr(cove, 'remap_volatile') and not hasattr(cove, 'names_seen')
    assert 'names_seen' not in cove.state_dict()

def _tool_episode(tid, *actions, names=None):
    msgs = [dict(role='user', content=f'task {tid}')] + [dict(role='assistant', content=a) for a in actions]
    task = Task(tid, 'tableqa', 'test', f'task {tid}', payload=dict(surface=dict(version=2, names=names)))
    return NS(messages=msgs, feedback=NS(score=1.0), task=task)

def test_stale_rows_never_train(cove):
    "Issue 53 item 4: a kept success calling a name its surface lacks loses lambda and, under q_min, is not trained."
    names = {'count': 'tally'}
    cove.keep_trajectory(_tool_episode('t1', 'Action: count("a", 1)', 'Action: tally("a", 1)', 'Answer: 2',
                                       names=names), 'parametric_candidate')
    cove.keep_trajectory(_tool_episode('t2', 'Action: tally("a", 1)', 'Answer: 2', names=names), 'hybrid')
    data, counts = cove.update_rows(None, 'tableqa').sft(memory_aware=False)
    assert data.num_rows == 1 and counts['stale_dropped'] == 1
    assert cove.kpo.stats.penalties >= 1

def test_cove_ablations_switch_one_thing_each(tmp_path):
    from cove.method import METHODS
    from cove.trigger import FixedInterval
    cfg = load_config(overrides=CFG)
    for m in ('cove_no_trigger', 'cove_no_antirecitation', 'cove_no_release'): (tmp_path/m).mkdir()
    nt, nar, nr = (METHODS[m](cfg, tmp_path/m) for m in ('cove_no_trigger', 'cove_no_antirecitation',
                                                         'cove_no_release'))
    assert isinstance(nt.trigger, FixedInterval) and isinstance(nt.router, FeedbackRouter)
    assert (nar.kpo.anti_recitation, nar.release_on) == (False, True)
    assert (nr.kpo.anti_recitation, nr.release_on) == (True, False)
    played = dict(trace=[dict(role='assistant', content='Action: count("team", "Hawks")')],
                  surface=dict(version=1, names={'count': 'count'}))
    rows = nar.update_rows(None, 'tableqa')
    assert (rows.rename, rows.lam, rows.renamed(0, played)) == (False, 0.0, (played['trace'], played['surface']))
    assert nr._utility_pre(open_envs(['math'], cfg)['math'], 'math') is None    # no A/B before training either

def test_adapters_link_planted_mid_run_is_refused(cove, tmp_path):
    "Issue 42 item 4: an update never writes through a link put in place of adapters/ after the run began."
    elsewhere = tmp_path.parent/f'{tmp_path.name}-elsewhere'
    elsewhere.mkdir()
    (cove.out/'adapters').symlink_to(elsewhere)
    with pytest.raises(ValueError, match='link'): cove._train(None, 'math', 1)
    assert list(elsewhere.iterdir()) == []
