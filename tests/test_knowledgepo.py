"""Package-level tests of `cove.knowledgepo`: rule extraction on every question type, KB operations, promotion, renaming
through the real environment, the anti-recitation reward and memory release."""
import json
from dataclasses import replace
from types import SimpleNamespace as NS
import pytest
from cove.tasks.base import EpisodeResult, replay_reference
from cove.store import Entry, KnowledgeBase
from cove.tasks.surface import rename, with_surface, Surface
from cove.tasks.tableqa import EmbeddedTableQA, QTYPES, default_surface, replay
from cove.knowledgepo import (Candidate, KPOStats, KnowledgePO, names_in, rename_names, rule_candidates,
                              extract_candidates, label_candidate, update_kb, promote_revised, revision_counts,
                              rename_volatile, memory_aware_prompt, legal_names, observed_names, anti_recitation_reward,
                              recitation_violations, called_names, release, had_utility, uninformative, FEEDBACK_HINTS,
                              surface_names)

ENV = EmbeddedTableQA()
TASKS = ENV.tasks('same', n=12, seed=1)
V1 = default_surface()


@pytest.fixture(scope='module')
def emb():
    from cove.embed import Embedder
    return Embedder()


class FixedJudge:
    "A test double whose `choose` always answers `option` (to pin the override counting)."
    def __init__(self, option): self.option, self.calls = option, 0
    def choose(self, prompt, options, calibrate=True, content=None, content_free_prompt=None):
        self.calls += 1
        return NS(option=self.option)


def labelled(c, label=None): return replace(c, label=label or label_candidate(None, c, 'rules'))


def test_names_in_symbol_rule():
    s = Surface(2, {'count': 'tally', 'lookup': 'tbl_get', 'sum': 'total'})
    assert names_in('tally the rows, then total them', s) == []                     # plain words
    assert names_in("call tally(x); 'total' is gone; use tbl_get", s) == ['tally', 'total', 'tbl_get']
    # other identifiers, not these names
    assert names_in('tally_v2(x) and my_tally', s) == []
    assert names_in('x.tally(1)', s) == []                                           # a method of something else
    assert names_in('run `asklib` or exec.sql(q) but not (this)', None) == ['asklib', 'exec.sql']


@pytest.mark.parametrize('i', range(6))
def test_rule_candidates_success_every_qtype(i):
    task = TASKS[i]
    r = replay_reference(ENV, task)
    assert r.success
    vol, stab = rule_candidates(task, r)
    used = list(dict.fromkeys(c.name for c in r.state.calls))
    assert (vol.kind, vol.proposed, vol.names) == ('skill', 'volatile', used)
    assert (stab.kind, stab.proposed, stab.names) == ('skill', 'stable', [])
    # the stable twin is name-free on any surface
    for s in (V1, rename(V1, 0), rename(V1, 1)):
        assert names_in(stab.content, s) == []
    # values of the question became placeholders
    assert '<' in vol.content and '<' in stab.content
    assert task.payload['qtype'] == QTYPES[i]


def test_rule_candidates_failures():
    task = with_surface(TASKS[1], rename(V1, 4), split='renamed')
    st, fb = replay(ENV, task, ['Action: count("x", "y")', 'Answer: nope'])
    mem, hint = rule_candidates(task, EpisodeResult(task, st, fb))
    assert mem.names == surface_names(task.payload['surface']) and mem.proposed == 'volatile'
    assert ("'count' is not a tool" in mem.content
            and (fb.kind, hint.content) == ('tool_error', FEEDBACK_HINTS['tool_error']))
    # no call, no answer: format failure
    st, fb = replay(ENV, TASKS[2], ['I think it is 3.'])
    no_call, fmt = ENV.hints['no_tool_call'], ENV.hints['format']                   # the table family's own wording
    assert [c.content for c in rule_candidates(TASKS[2], EpisodeResult(TASKS[2], st, fb))] == [no_call, fmt]
    assert rule_candidates(TASKS[2], EpisodeResult(TASKS[2], st, fb), max_candidates=1)[0].content == no_call


def test_label_override_is_counted():
    named = Candidate('skill', 'call tbl_get(k) then answer', ['tbl_get'])
    plain = Candidate('memory', 'Read the question twice before answering.')
    s, j = KPOStats(), FixedJudge('stable')
    assert [label_candidate(j, c, stats=s) for c in (named, plain)] == ['volatile', 'stable']
    assert (s.overrides, dict(s.labels), j.calls) == (1, {'volatile': 1, 'stable': 1}, 2)
    assert label_candidate(j, named, mode='judge') == 'stable'                         # the judge alone keeps its label
    assert label_candidate(FixedJudge('volatile'), named, stats=s) == 'volatile' and s.overrides == 1
    with pytest.raises(ValueError, match='needs a judge'): label_candidate(None, plain)


def test_unparseable_judge_output_is_counted():
    class Garbage:
        stats = {}
        def texts(self, prompts, **kw):   # the batched call: an unusable output comes back as its error
            from cove.judge import JudgeParseError
            return [JudgeParseError('judge output unusable (empty output)') for _ in prompts]
    s = KPOStats()
    r = replay_reference(ENV, TASKS[1])
    out = extract_candidates(Garbage(), TASKS[1], r, extractor='both', stats=s)
    assert s.unparseable == 2 and s.candidates == {'rules': 2} and len(out) == 2


def test_update_kb_operations(emb):
    kb, s = KnowledgeBase(embedder=emb), KPOStats()
    r = replay_reference(ENV, TASKS[1])
    vol, stab = [labelled(c) for c in rule_candidates(TASKS[1], r)]
    assert [update_kb(kb, c, stats=s).op for c in (vol, stab)] == ['insert', 'insert']   # different volatility sides
    assert update_kb(kb, vol, stats=s).op == 'merge'                                     # the same content again
    stale = labelled(rule_candidates(TASKS[1],
                                     EpisodeResult(TASKS[1],
                                                   *replay(ENV, with_surface(TASKS[1], rename(V1, 2)),
                                                           ['Action: count(1)', 'Answer: 0'])))[0])
    fresh_task = with_surface(TASKS[1], rename(rename(V1, 2), 3))
    fresh = labelled(rule_candidates(fresh_task,
                                     EpisodeResult(fresh_task,
                                                   *replay(ENV, fresh_task, ['Action: count(1)', 'Answer: 0'])))[0])
    a, b = update_kb(kb, stale, stats=s), update_kb(kb, fresh, stats=s)
    assert (a.op, b.op, b.entry_id) == ('insert', 'revise', a.entry_id)
    assert kb.get(a.entry_id).names == fresh.names and kb.get(a.entry_id).revisions == 1
    assert update_kb(kb, Candidate('memory', 'ok', label='stable'), stats=s).op == 'discard'
    assert dict(s.ops) == {'insert': 3, 'merge': 1, 'revise': 1, 'discard': 1} and dict(s.discards) == {'too short': 1}
    with pytest.raises(ValueError, match='embedder'): update_kb(KnowledgeBase(dim=4), vol)


def test_promotion_counts_corrections_not_merges(emb):
    kb = KnowledgeBase(embedder=emb)
    c = lambda t: Candidate('memory', t, ['pts'], label='stable')
    i = update_kb(kb, c('The players table keeps points per game in column players.pts.')).entry_id
    for _ in range(3): update_kb(kb, c('The players table keeps points per game in column players.pts.'))   # merges
    assert kb.get(i).revisions == 3 and revision_counts(kb).get(i, 0) == 0 and promote_revised(kb) == []
    update_kb(kb, c('The players table keeps total points in column players.pts, not per game.'))
    assert promote_revised(kb, R=2) == [] and promote_revised(kb, R=1) == [i]
    e = kb.get(i)
    assert (e.label, e.promoted) == ('volatile', True) and promote_revised(kb, R=1) == []      # already volatile


@pytest.mark.parametrize('seed', [0, 1, 2, 3])
def test_renamed_episode_is_consistent(emb, seed):
    task, src = TASKS[4], TASKS[3]   # the entries come from another task: a task never retrieves its own
    kb = KnowledgeBase(embedder=emb)
    for c in rule_candidates(src, replay_reference(ENV, src)): update_kb(kb, labelled(c))
    p = memory_aware_prompt(ENV, task, kb, k=5, rename_seed=seed)
    vol = [e for e in p.entries if e.label == 'volatile'][0]
    stable = [e for e in p.entries if e.label == 'stable'][0]
    new = Surface.from_dict(p.task.payload['surface'])
    assert set(vol.names) <= set(new.names.values()) and names_in(vol.content, V1) == []
    # stable knowledge untouched
    assert stable.content == kb.get(stable.id).content
    assert p.legal == set(new.names.values()) and set(vol.names) <= p.observed
    for n in vol.names: assert f'- {n}(' in p.messages[0]['content']                         # documented surface agrees
    # the gold plan under the new names
    ref = [rename_names(a, p.mapping) for a in ENV.reference(task)]
    st, fb = replay(ENV, p.task, ref)
    assert fb.success and st.api_correct
    assert anti_recitation_reward(fb.score, st.calls, p.legal, p.observed) == 1.0
    st, fb = replay(ENV, p.task, ENV.reference(task))                                        # the recited v1 plan
    assert st.api_correct is False and anti_recitation_reward(fb.score, st.calls, p.legal, p.observed) == fb.score - 0.5


def test_anti_recitation_reward_numbers():
    legal, seen = {'a_1', 'b_1'}, {'a_1', 'b_1', 'old'}
    assert anti_recitation_reward(1.0, [], legal, seen) == 1.0
    assert anti_recitation_reward(1.0, ['a_1'], legal, seen) == 1.0
    assert anti_recitation_reward(1.0, ['old'], legal, seen) == 0.5
    assert anti_recitation_reward(0.0, ['invented'], legal, seen, lam=1.0) == -1.0
    assert anti_recitation_reward(0.5, ['c_1'], legal | {'c_1'}, seen, lam=0.25) == 0.25
    assert recitation_violations([NS(name='old'), 'a_1', 'c_1'], legal | {'c_1'}, seen) == [('old', 'stale'),
                                                                                            ('c_1', 'unobserved')]
    assert called_names('Thought.\nAction: tbl_get("a", 1)\nAnswer: 3') == ['tbl_get']
    s = KPOStats()
    anti_recitation_reward(1.0, ['old'], legal, seen, stats=s)
    anti_recitation_reward(1.0, ['a_1'], legal, seen, stats=s)
    assert s.penalties == 1


def test_legal_and_observed_names():
    t = with_surface(TASKS[0], rename(V1, 9))
    names = set(surface_names(t.payload['surface']))
    assert legal_names(t) == names == legal_names(NS(task=t))
    e = Entry('Use count(x) then `old_tool`.', 'memory', 'volatile', ['count'])
    assert observed_names(t, [e]) == names | {'count', 'old_tool'}
    assert legal_names(replace(t, payload={})) == set()


def test_release_every_branch(emb):
    kb = KnowledgeBase(embedder=emb)
    spec = {'keep': ('stable', 2, 1, None, 0.5), 'edge': ('stable', 0, 0, 0.2, 0.25),
            'intern': ('stable', 1, 1, 0.5, 0.125), 'neg_pre': ('stable', 3, 3, -0.1, 0.9),
            'unused': ('stable', 0, 0, None, 0.9), 'vol': ('volatile', 1, 1, 0.3, -0.5),
            'strat': ('strategic', 1, 1, 0.3, -0.5)}
    ids = {k: kb.insert(Entry(f'{k} lesson about rows', 'memory', lab, uses=u, successes=s, delta_pre=d)) for k,
           (lab, u, s, d, _) in spec.items()}
    score = {ids[k]: 0.5 + v[4] for k, v in spec.items()}
    seen = []
    def evaluate_fn(tasks, entries):
        assert tasks == ['h1']; seen.append(tuple(e.id for e in entries))
        return score[entries[0].id] if entries else 0.5
    s = KPOStats()
    out = release(kb, evaluate_fn, ['h1'], threshold=0.25, stats=s, min_tasks=1)
    assert out['kept'] == [ids['unused'], ids['keep']]              # never A/B-tested: kept; Δ = 0.5 > threshold
    # Δ = 0.125, and Δ == threshold (§4.4.2: Δ_post <= threshold)
    assert out['internalized'] == [ids['intern'], ids['edge']]
    assert out['discarded'] == [ids['neg_pre']]                     # an A/B before training measured no utility
    assert out['protected'] == [ids['vol'], ids['strat']]
    assert seen.count(()) == 1 and len(seen) == 4
    assert kb.get(ids['intern']).status == 'internalized' and kb.get(ids['intern']).delta_post == 0.125
    assert kb.get(ids['vol']).delta_post is None
    assert dict(s.releases) == {'internalized': 2, 'discarded': 1, 'kept': 2, 'protected': 2, 'untested': 0}
    assert out['n'] == 1 and out['untested'] == []
    assert [had_utility(Entry('x y z w', 'memory', 'stable', uses=2, successes=s_, delta_pre=d)) for s_,
            d in ((0, None), (1, None), (1, 0.0))] == [False, True, False]
    empty = release(KnowledgeBase(embedder=emb), lambda *a: pytest.fail('no entry needs an A/B'), ['h1'])
    assert [empty[k] for k in ('internalized', 'discarded', 'kept', 'protected', 'deltas')] == [[], [], [], [], {}]


def test_release_needs_enough_tasks_to_decide(emb):
    "Issue 40: an A/B decides on >= 16 paired held-out tasks (release.min_tasks); an entry never A/B-tested is kept."
    kb = KnowledgeBase(embedder=emb)
    i = kb.insert(Entry('a lesson that did not help before training', 'memory', 'stable', uses=1, delta_pre=0.0))
    j = kb.insert(Entry('a lesson that helped before training', 'memory', 'stable', uses=1, delta_pre=0.5))
    u = kb.insert(Entry('a lesson used but never tested', 'memory', 'stable', uses=3, successes=0))
    few = release(kb, lambda *a: pytest.fail('no A/B on 15 tasks'), ['h'] * 15)   # n = 15 < 16: nothing decided
    assert few['kept'] == [i, j, u] and not few['discarded'] + few['internalized']
    assert {kb.get(x).status for x in (i, j, u)} == {'online'}
    out = release(kb, lambda ts, es: 0.5, ['h'] * 16)
    assert (out['discarded'], out['internalized'], out['kept']) == ([i], [j], [u])   # the untested entry is kept
    assert [kb.get(x).status for x in (i, j, u)] == ['discarded', 'internalized', 'online']


def test_knowledgepo_facade(emb):
    with pytest.raises(ValueError, match='need a judge'): KnowledgePO(KnowledgeBase(embedder=emb))
    kpo = KnowledgePO(KnowledgeBase(embedder=emb), extractor='rules', label_mode='rules', R=1)
    ops = kpo.observe(replay_reference(ENV, TASKS[3]))
    assert [o.op for o in ops] == ['insert', 'insert'] and kpo.stats.candidates == {'rules': 2}
    p = kpo.prompt(ENV, TASKS[3], rename_seed=5)
    assert kpo.reward(1.0, [p.mapping['argmax']], p) == 1.0 and kpo.reward(1.0, ['argmax'], p) == 0.5
    assert json.loads(json.dumps(kpo.stats.to_dict()))['renamed'] == 1
    assert uninformative('The answer is: 12') == 'too short'


class RecordingJudge(FixedJudge):
    "A `FixedJudge` that keeps every prompt it was asked to choose on."
    def __init__(self, option): super().__init__(option); self.prompts = []
    def choose(self, prompt, options, calibrate=True, content=None, content_free_prompt=None):
        self.prompts.append(prompt); return super().choose(prompt, options, calibrate, content, content_free_prompt)


def test_knowledgepo_labels_with_the_six_shot_prompt(emb):
    """The pipeline's volatility judge reads the six worked examples by default (the measured best); `label_shots=0` is
    the zero-shot template."""
    from cove.knowledgepo import volatility_prompt, VOLATILITY_PROMPT
    for shots, want in ((None, volatility_prompt(6)), (0, VOLATILITY_PROMPT)):
        j = RecordingJudge('stable')
        kpo = KnowledgePO(KnowledgeBase(embedder=emb), judge=j, extractor='rules', label_mode='judge+rules',
                          **({} if shots is None else {'label_shots': shots}))
        kpo.observe(replay_reference(ENV, TASKS[3]))
        assert j.prompts and set(j.prompts) == {want}


def test_observe_revises_entries_from_the_deprecation_notice(emb):
    """An episode whose observation carries a deprecation notice revises the entry naming the old tool (a versioned
    revise, counted with its episode); retrieval then shows the current name. A never-existing name revises nothing."""
    from cove.knowledgepo import episodes_to_relearn, feedback_renames
    kpo = KnowledgePO(KnowledgeBase(embedder=emb), extractor='rules', label_mode='rules')
    eid = kpo.kb.insert(Entry("To count the rows of a team, call count(team, value) first.", 'memory', 'volatile',
                              names=['count'], family='tableqa'))
    t = ENV.tasks('renamed', 1)[0]
    new = ENV.surface(t).name('count')
    st, fb = replay(ENV, t, ['Action: nothing_like_it(team)', 'Answer: 3'])
    kpo.observe(EpisodeResult(t, st, fb))
    assert kpo.kb.get(eid).revisions == 0 and kpo.stats.feedback_revisions == []
    st, fb = replay(ENV, t, ['Action: count(team, "Hawks")', 'Answer: 3'])
    r = EpisodeResult(t, st, fb)
    assert feedback_renames(r) == {'count': new}
    kpo.observe(r, episode=11)
    e = kpo.kb.get(eid)
    assert (e.names, e.revisions, e.label) == ([new], 1, 'volatile') and f'{new}(team, value)' in e.content
    assert kpo.stats.feedback_revisions == [dict(episode=11, task=t.id, entry=eid, renamed={'count': new})]
    assert 'revise' in [a['op'] for a in kpo.kb.audit_log(eid)]
    hit = kpo.kb.retrieve('count the rows of a team', k=1, family='tableqa')[0].entry
    assert hit.id == eid and new in hit.content and not names_in(hit.content, ['count'])
    assert KPOStats.from_dict(json.loads(json.dumps(kpo.stats.to_dict()))) == kpo.stats
