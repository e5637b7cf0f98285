"""EvolveR (`cove.evolver`): the equations on hand-computed cases, a `cove run --method evolver` killed with SIGKILL
that resumes with exactly N episodes and nothing applied twice, and a tiny GRPO update (after a cold-start SFT)
through the method."""
import json, os, signal, sqlite3, subprocess, sys, time
from collections import Counter
from pathlib import Path
import numpy as np
import pytest
from cove.evolver import (metric_score, to_prune, find_equivalent, format_reward, think_score, search_score,
                          evolver_reward, parse_actions, close_stopped, answer_turn, EvolverMethod)

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = [sys.executable, '-c', 'import sys, cove.evolver; from cove.cli import main; sys.exit(main(sys.argv[1:]))']
ENV = {**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'}

# --- equations, hand-computed -------------------------------------------------------------------

def test_metric_score_and_pruning():
    assert metric_score(0, 0) == 0.5 and metric_score(0, 2) == 0.25 and metric_score(4, 6) == 5/8
    assert abs(metric_score(0, 1) - 1/3) < 1e-12
    # 0.3 threshold: (0,1) -> 0.333 stays, (0,2) -> 0.25 pruned, (1,5) -> 2/7 = 0.286 pruned, (2,5) -> 3/7 stays
    assert to_prune({'a': (0, 1), 'b': (0, 2), 'c': (1, 5), 'd': (2, 5), 'e': (0, 0)}, 0.3) == ['b', 'c']
    assert to_prune({'x': (1, 3)}, 0.4) == [] and to_prune({'x': (1, 4)}, 0.4) == ['x']   # 2/5 = 0.4 is not below 0.4

def test_dedup_threshold_boundary():
    e0, at = np.array([1.0, 0.0]), (lambda c: np.array([c, np.sqrt(1 - c * c)]))
    calls = []
    def llm(i): calls.append(i); return True
    assert find_equivalent(e0, [(1, at(0.85))], llm, threshold=0.85) == (1, [(1, 0.85, True)]) and calls == [1]
    calls.clear()
    assert find_equivalent(e0, [(1, at(0.8499)), (2, at(0.2))], llm, threshold=0.85) == (None, []) and calls == []
    no = lambda i: calls.append(i) or False
    # best first, 5 never checked
    assert find_equivalent(e0, [(3, at(0.9)), (4, at(0.95)), (5, at(0.7))], no)[0] is None and calls == [4, 3]

def test_format_reward_and_reward():
    # 7-8: the authors' code
    assert [think_score(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9)] == [0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 0.0, 0.0, 0.5]
    assert (search_score(1, 1) == pytest.approx(0.6) and search_score(0, 1) == 0.2
            and search_score(2, 0) == pytest.approx(0.3))
    assert search_score(4, 4) == pytest.approx(1.0)                     # 0.5 + bonus capped at 0.5
    t = ('<think>first hop</think><search_knowledge>who founded X</search_knowledge><think>second '
         'hop</think><answer>Oslo</answer>')
    assert format_reward(t) == pytest.approx((0.3 + 0.2) / 2)
    # no search: incomplete
    assert format_reward(t.replace('<search_knowledge>who founded X</search_knowledge>', '')) == 0.0
    # 'ab' is no valid search
    assert format_reward('<think>abc</think><search_experience>ab</search_experience><answer>1</answer>') == 0.0
    e = '<think>plan</think><search_experience>lessons</search_experience><search_knowledge>facts</search_knowledge><answer>1</answer>'
    assert format_reward(e) == pytest.approx((0.2 + 0.6) / 2)
    assert (evolver_reward(1, format_reward(e)) == pytest.approx(1.04)
            and evolver_reward(0, 0.5, 1.0, 0.1) == pytest.approx(0.05))

def test_action_parsing():
    acts, probs = parse_actions('<think>x y z</think> text <search_experience>q</search_experience><answer> 42 '
                                '</answer><think>open')
    assert [(a.kind, a.content, a.valid) for a in acts] == [('think', 'x y z', True), ('search_experience', 'q', False),
                                                            ('answer', '42', True)]
    assert probs == ['unclosed <think>']
    assert close_stopped('<think>go</think><answer>Oslo', 'stop') == '<think>go</think><answer>Oslo</answer>'
    assert (answer_turn('math', '12') == 'Answer: 12'
            and answer_turn('code', '```python\nx=1\n```') == '```python\nx=1\n```')

def test_em_is_the_papers_on_the_whole_answer_tag():
    """EM: the whole last <answer> of the model's turns, normalised; the issue's three cases score 0, the lenient parse
    1."""
    from cove.core import Task, msg
    from cove.evolver import answer_content, exact_match, gold_answer, episode_outcome
    from cove.tasks.base import make_env
    mh, t = make_env('multihop'), Task('em-42', 'multihop', 'test', 'What is six times seven?', target='42')
    for content, em in [('Answer: 42', 0.0), ('The answer is 42', 0.0), ('42\nbecause six sevens are 42', 0.0),
                        ('42', 1.0), (' The 42. ', 1.0)]:
        turns = [msg('assistant', f'<think>six sevens</think><answer>{content}</answer>')]
        assert exact_match(answer_content(turns), gold_answer(t)) == em
        st = mh.reset(t); mh.step(st, answer_turn('multihop', answer_content(turns)))
        fb, lenient = episode_outcome(mh, t, st, turns)
        assert (fb.success, lenient) == (bool(em), True)                  # the family's evaluator accepts all five
    assert answer_content([msg('system', '<answer>42</answer>'), msg('assistant', 'Answer: 42')]) is None   # no tag
    assert evolver_reward(exact_match(None, '42'), format_reward('')) == 0.0   # empty (the authors' scorer: 0.4)

# --- kill -9 and resume -------------------------------------------------------------------------

def _cmd(out, episodes):
    return LAUNCH + ['run', '--method', 'evolver', '--tasks', 'multihop,math', '--episodes', str(episodes), '--model',
                     'tiny', '--set', 'model.batch_size=2', '--set', 'model.max_new_tokens=12', '--set',
                     # resume bookkeeping only: no training
                     'evolver.prune_every=2', '--set', 'evolver.max_turns=1', '--set', 'evolver.cold_start=false',
                     '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def test_evolver_resume_after_kill(tmp_path):
    out, per = tmp_path/'run', 5
    n = 2 * per
    p = subprocess.Popen(_cmd(out, per), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and len(_episodes(out)) < 3: time.sleep(0.05)
    assert p.poll() is None, 'the run finished before it could be killed'
    p.send_signal(signal.SIGKILL); p.wait()
    killed_at = len(_episodes(out))
    assert killed_at < n
    r = subprocess.run(_cmd(out, per), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    eps = _episodes(out)
    assert sorted(e['episode'] for e in eps) == list(range(n))          # each episode exactly once
    for e in eps: assert {'reward', 'format_reward', 'actions', 'principles_used', 'parse_failures'} <= set(e)
    con = sqlite3.connect(out/'evolver.sqlite')
    assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    # applied once each
    assert con.execute('SELECT COUNT(*), COUNT(DISTINCT key) FROM episodes').fetchone() == (n, n)
    assert sorted(x for (x,) in con.execute('SELECT n FROM episodes')) == list(range(1, n + 1))
    # one phase per 2 episodes
    assert [x for (x,) in con.execute('SELECT n FROM phases ORDER BY n')] == list(range(1, n // 2 + 1))
    per_ep = Counter(json.loads(d)['episode'] for (d,) in con.execute("SELECT detail FROM events WHERE kind IN "
                                                                      "('distilled', 'distill_failed')"))
    # each trajectory distilled once
    assert len(per_ep) == n and set(per_ep.values()) == {1}
    assert con.execute('SELECT COUNT(*) FROM episodes WHERE distilled = 0').fetchone()[0] == 0
    uses = con.execute('SELECT COALESCE(SUM(uses), 0) FROM principles').fetchone()[0]
    # a merged principle adds a use
    merges = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'merge'").fetchone()[0]
    # once per episode
    assert uses == sum(len(json.loads(i)['used']) for (i,) in con.execute('SELECT info FROM episodes')) + merges
    m = json.loads((out/'metrics.json').read_text())
    assert m['overall']['n'] == n and m['applied'] == n and m['offline_phases'] == n // 2
    assert m['distilled'] + m['distill_failures'] == n
    assert m['principles_inserted'] == sum(m['principles'].values()) + sum(m['principles_pruned'].values())
    # finished: adds nothing
    r = subprocess.run(_cmd(out, per), cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    m2 = json.loads((out/'metrics.json').read_text())
    assert (len(_episodes(out)) == n
            and {k: m2[k] for k in ('applied', 'distilled', 'principles',
                                    'merges')} == {k: m[k] for k in ('applied', 'distilled', 'principles', 'merges')})
    print(f"killed after {killed_at} of {n} episodes; principles {m['principles']}, distilled {m['distilled']}, "
          f"failures {m['distill_failures']}")

# --- one tiny GRPO update through the method ------------------------------------------------------

def test_cold_start_and_grpo_update(tmp_path):
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.tasks.base import make_env
    cfg = load_config(overrides={'model.name': 'tiny', 'model.max_new_tokens': 8, 'evolver.max_turns': 1,
                                 'evolver.prune_every': 0, 'evolver.train_every': 2, 'evolver.cold_start': True,
                                 'evolver.algo': 'grpo', 'train.max_steps': 1})
    pol = HFPolicy.load('tiny')
    meth = EvolverMethod(cfg, tmp_path, pol)
    env = make_env('math')
    res = meth.run_batch(env, env.tasks('test', 2, 0))
    assert len(res) == 2
    ups = {r[0]: (r[1], json.loads(r[2])) for r in meth.store.conn.execute('SELECT key, name, detail FROM updates')}
    assert set(ups) == {'cold_start:math', 'train:1'}, ups
    cs, grpo = ups['cold_start:math'], ups['train:1']
    # cold-start SFT on reference trajectories
    assert cs[0] and cs[1]['algo'] == 'sft' and cs[1]['train_tokens'] > 0
    assert grpo[0] and grpo[1]['algo'] == 'grpo' and grpo[1]['steps'] == 1 and grpo[1]['train_tokens'] > 0, grpo
    # multi-turn rollouts of the played tasks, scored whole (issue 11)
    ro = grpo[1]['rollouts']
    assert ro['calls'] == cfg['train.grpo_generations'] and ro['calls'] <= ro['turns'] <= 2 * ro['calls'], ro
    assert (tmp_path/'adapters'/grpo[0]/'adapter_config.json').exists() and pol.active_adapter == grpo[0]
    m = meth.metrics()
    assert (m['parametric_updates'] == 2 and m['train_tokens'] == cs[1]['train_tokens'] + grpo[1]['train_tokens']
            and m['adapter'] == grpo[0])
    # resume: the latest adapter is hot-swapped back
    pol2 = HFPolicy.load('tiny')
    meth2 = EvolverMethod(cfg, tmp_path, pol2)
    assert meth2.adapter == grpo[0] and pol2.active_adapter == grpo[0] and meth2.n_applied == 2

def test_sft_ablation_update(tmp_path):
    """The SFT ablation (`evolver.algo=sft`): rejection fine-tuning on the successful trajectories since the last update
    only."""
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.tasks.base import make_env
    from cove.agent import replay_reference
    cfg = load_config(overrides={'model.name': 'tiny', 'model.max_new_tokens': 8, 'evolver.max_turns': 1,
                                 'evolver.prune_every': 0, 'evolver.train_every': 2, 'evolver.cold_start': False,
                                 'evolver.algo': 'sft', 'train.max_steps': 1})
    pol = HFPolicy.load('tiny')
    meth = EvolverMethod(cfg, tmp_path, pol)
    env = make_env('math')
    meth.run_batch(env, env.tasks('test', 2, 0))
    ups = lambda: {r[0]: (r[1], json.loads(r[2]))
                   for r in meth.store.conn.execute('SELECT key, name, detail FROM updates')}
    # the random tiny model solves nothing
    assert meth.store.conn.execute('SELECT SUM(success) FROM episodes').fetchone()[0] == 0
    assert ups()['train:1'][0] is None and ups()['train:1'][1]['skipped'] == 'no successful trajectory'
    # two successful trajectories (reference replays) join the stream; the next update trains on exactly those
    # the fields run_batch records
    info = json.loads(meth.store.conn.execute('SELECT info FROM episodes ORDER BY n LIMIT 1').fetchone()[0])
    for t, key in zip(env.tasks('train', 2, 0), meth.keys.keys(env.tasks('train', 2, 0))):
        r = replay_reference(env, t)
        assert r.success and meth.apply(r, info | dict(reward=1.0), key)
    meth.update('train:2')
    name, d = ups()['train:2']
    assert name and d['algo'] == 'sft' and d['examples'] == 2 and d['steps'] == 1 and d['train_tokens'] > 0, d
    assert pol.active_adapter == name and meth.metrics()['parametric_updates'] == 1


def test_defaults_are_the_papers_system(tmp_path, monkeypatch):
    """By default: cold start, then GRPO updates at train.grpo_lr on a schedule; `evolver.no_rl` is the ablation without
    updates."""
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.tasks.base import make_env
    import cove.evolver
    d = load_config()
    assert (d['evolver.cold_start'] and d['evolver.algo'] == 'grpo' and d['evolver.train_every'] > 0
            and not d['evolver.no_rl'])
    seen = {}
    def fake_grpo(policy, data, reward, out_dir, **kw): seen.update(kw); raise ValueError('captured')
    monkeypatch.setattr(cove.evolver, 'train_grpo', fake_grpo)   # the name EvolveR's update calls
    base = {'model.name': 'tiny', 'model.max_new_tokens': 8, 'evolver.max_turns': 1, 'evolver.prune_every': 0,
            'evolver.train_every': 2, 'evolver.cold_start': False}
    env = make_env('math')
    for sub in ('rl', 'no_rl'): (tmp_path/sub).mkdir()
    meth = EvolverMethod(load_config(overrides=base), tmp_path/'rl', HFPolicy.load('tiny'))
    meth.run_batch(env, env.tasks('test', 2, 0))
    assert seen['lr'] == d['train.grpo_lr'] != d['train.lr']                     # GRPO's own learning rate
    ablation = EvolverMethod(load_config(overrides={**base, 'evolver.no_rl': True}), tmp_path/'no_rl',
                             HFPolicy.load('tiny'))
    ablation.run_batch(env, env.tasks('test', 2, 0))
    assert ablation.n_applied == 2 and ablation.store.conn.execute('SELECT COUNT(*) FROM updates').fetchone()[0] == 0


# --- the authors' settings as keys (issue 45) ---------------------------------------------------------------------

def test_em_any_gold_alias():
    "A multi-alias row (NQ's golden_answers): any alias after normalisation is a match; the joined string is none."
    from cove.core import Task, msg
    from cove.evolver import em_feedback, exact_match, gold_answers
    t = Task('nq', 'multihop', 'test', 'Capital of France?', target='Paris',
             meta=dict(golden_answers=['Paris', 'City of Light']))
    fb = lambda c: em_feedback([msg('assistant', f'<answer>{c}</answer>')], t)
    assert [fb(c).success for c in ('paris', 'the City of Light', 'Paris, France')] == [True, True, False]
    assert exact_match('city of light', 'Paris|City of Light') == 0.0
    assert exact_match('city of light', ['Paris', 'City of Light']) == 1.0
    # a list target: several values, all needed (WikiTableQuestions)
    assert gold_answers(Task('w', 'tableqa', 'test', 'q', target=['Oslo', 'Rome'])) == ['Oslo|Rome']

def test_balanced_pick_is_the_authors_rule():
    "2 of 8: one success where there is one, the rest failures; 8 successes keep one, G = 4 all solved keeps none."
    from cove.evolver import balanced_pick
    one = [j == 3 for j in range(8)]
    for s in range(10):
        p = balanced_pick(one, rng=np.random.default_rng(s))
        assert len(p) == 2 and 3 in p
    assert len(balanced_pick([False] * 8)) == 2 and len(balanced_pick([True] * 8)) == 1
    assert balanced_pick([True] * 4) == []
    rng = np.random.default_rng(1)
    rolls = rng.random((4000, 8)) < 0.1
    kept = [r[i] for r in rolls for i in balanced_pick(list(r), rng=rng)]
    assert abs(np.mean(kept) - 0.285) < 0.02          # 10% success: kept rollouts ~28% successes, (1 − 0.9⁸) / 2

def test_balanced_buffer_credits_kept_rollouts_only(tmp_path):
    "`evolver.buffer=balanced`: online episodes count no use; a GRPO update credits the kept rollouts, with its record."
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.tasks.base import make_env
    from cove.agent import replay_reference
    cfg = load_config(overrides={'model.name': 'tiny', 'model.max_new_tokens': 8, 'evolver.max_turns': 1,
                                 'evolver.prune_every': 0, 'evolver.train_every': 2, 'evolver.cold_start': False,
                                 'evolver.buffer': 'balanced', 'train.max_steps': 1})
    meth = EvolverMethod(cfg, tmp_path, HFPolicy.load('tiny'))
    with meth.store.transaction(): pid = meth.store.insert('guiding', 'Add the numbers carefully.', 'math')
    env = make_env('math')
    t = env.tasks('train', 1, 0)[0]
    r = replay_reference(env, t)
    r.retrieved = [pid]
    assert meth.apply(r, dict(reward=1.0), meth.keys.keys([t])[0])
    assert meth.store.get(pid).uses == 0                                   # online episodes are not the buffer
    meth.run_batch(env, env.tasks('test', 1, 0))                           # the second applied episode: a GRPO update
    d = json.loads(meth.store.conn.execute("SELECT detail FROM updates WHERE key = 'train:1'").fetchone()[0])
    g = cfg['train.grpo_generations']
    # one pick of each prompt's G rollouts; the tiny model solves none
    assert d['buffer'] == dict(kept=max(1, int(g * 0.25)) * (d['rollouts']['calls'] // g), successes=0), d
