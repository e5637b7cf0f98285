"""MemRL (`cove.memrl`): the equations on hand-computed cases, and `cove run --method memrl` killed with SIGKILL resumes
with exactly N episodes and no utility update applied twice."""
import json, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest
from cove.memrl import zscore, two_phase, mc_update, td_update, reward, epoch_metrics, usable_summary

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = [sys.executable, '-c', 'import sys, cove.memrl; from cove.cli import main; sys.exit(main(sys.argv[1:]))']
ALPHA, Q_INIT = 0.3, 0.0

# --- equations -------------------------------------------------------------------------------------------------

def test_zscore_constant_is_zero():
    assert zscore([0.4, 0.4]).tolist() == [0.0, 0.0] and zscore([2.0]).tolist() == [0.0] and zscore([]).size == 0
    np.testing.assert_allclose(zscore([1, 2, 3]), [-1.224745, 0, 1.224745], atol=1e-6)

def test_two_phase_ranking_and_threshold():
    sims, qs = [0.9, 0.8, 0.7, 0.4, 0.6], [-1, 1, 0.5, 1, 0]
    pool, sel, sc = two_phase(sims, qs, delta=0.5, k1=3, k2=2, lam=0.5)
    assert pool.tolist() == [0, 1, 2] and sel.tolist() == [1, 0]          # the Q = -1 distractor drops below memory 1
    np.testing.assert_allclose(sc, [-0.074034, 0.490290, -0.416256], atol=1e-5)
    assert two_phase(sims, qs, 0.5, 3, 3, 0.0)[1].tolist() == [0, 1, 2]    # λ = 0: similarity order
    assert two_phase(sims, qs, 0.5, 3, 3, 1.0)[1].tolist() == [1, 2, 0]    # λ = 1: utility order
    assert two_phase(sims, qs, 0.5, 5, 5, 0.5)[0].tolist() == [0, 1, 2, 4] # 0.4 is under δ whatever k1
    assert two_phase(sims, qs, 0.85, 3, 3, 0.5)[1].tolist() == [0]         # one candidate: z-scores 0, injected
    assert two_phase(sims, qs, 0.9, 3, 3, 0.5)[0].tolist() == [0]          # sim == δ is in: Phase A keeps sim >= δ
    assert two_phase(sims, qs, 0.95, 3, 3, 0.5)[0].tolist() == []          # nothing that similar: empty pool
    # equal Q in the pool: ẑ(Q) = 0, so the ranking is by similarity alone
    assert two_phase([0.6, 0.9, 0.7], [0.2, 0.2, 0.2], 0.5, 5, 3, 0.5)[1].tolist() == [1, 2, 0]

def test_mc_and_td_updates():
    assert reward(True) == 1.0 and reward(False) == -1.0
    q = mc_update(Q_INIT, 1.0, ALPHA); assert q == pytest.approx(0.3)
    q = mc_update(q, 1.0, ALPHA); assert q == pytest.approx(0.51)
    assert mc_update(q, -1.0, ALPHA) == pytest.approx(0.057)
    assert td_update(0.3, 1.0, 0.3, 0.9, 0.5) == pytest.approx(0.645)      # 0.3 + 0.3·(1 + 0.9·0.5 − 0.3)
    assert td_update(-0.2, -1.0, 0.5, 0.9, 0.0) == pytest.approx(mc_update(-0.2, -1.0, 0.5))

def test_sr_csr_fr_on_a_table():
    table = {'A': [1, 0, 1], 'B': [0, 1, 0], 'C': [1, 1, 0], 'D': [0, 0, 0]}
    recs = [dict(family_spec='math', split='test', task_id=t, epoch=e, status='success' if oks[e] else 'failure')
            for e in range(3) for t, oks in table.items()]
    m = epoch_metrics(recs)
    assert m['sr'] == 0.25 and m['csr'] == 0.75 and m['epochs'] == 3
    assert m['fr_per_epoch']['1'] == dict(n_lost=1, n_fail=2, fr=0.5)
    assert m['fr_per_epoch']['2'] == dict(n_lost=2, n_fail=3, fr=pytest.approx(2 / 3))
    assert m['fr'] == pytest.approx((0.5 + 2 / 3) / 2)
    recs[5]['status'] = 'error'                                            # an error counts as not solved (B, epoch 1)
    assert epoch_metrics(recs)['sr_per_epoch']['1'] == 0.25

def test_usable_summary():
    assert usable_summary('Multiply the speed by the time for each leg, then add the distances.')
    for bad in ['', 'Answer: 5', 'leaving Historicalasms automobileregularnearest bleachingIX controversned fewer',
                'go go go go go go go go go go', '\ufffd\ufffd\ufffd\ufffd of the \ufffd\ufffd\ufffd\ufffd\ufffd\ufffd',
                'The answer is: The answer is: The answer is: The answer is: The answer is:',
                'Task: Turn 1: The answer is Egypt. In one to three sentences, state the lesson for similar tasks: '
                'Egypt.']:
        assert usable_summary(bad) is None, bad
    task = 'Sofia buys 6 pens at 7 dollars each and 4 notebooks at 2 dollars each. She pays with a 100-dollar bill.'
    assert usable_summary('Task: Sofia buys 6 pens at 7 dollars each and 4 notebooks. She pays with a 100-dollar bill.',
                          task) is None

# --- kill -9 resume ----------------------------------------------------------------------------------------------

def _cmd(out):
    return LAUNCH + ['run', '--method', 'memrl', '--tasks', 'math,tableqa', '--episodes', '4', '--model', 'tiny',
                     '--set', 'run.epochs=2', '--set', 'model.batch_size=2', '--set', 'model.max_new_tokens=8',
                     '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def _check_memory(out, n):
    "Exactly one applied row per episode occurrence, and every Q the chain of its recorded MC updates from Q_init."
    con = sqlite3.connect(Path(out)/'memrl.sqlite')
    assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    infos = [json.loads(r[0]) for r in con.execute('SELECT info FROM applied ORDER BY rowid')]
    assert len(infos) == n and len({i['key'] for i in infos}) == n
    assert {i['key'] for i in infos} == {e['memrl']['key'] for e in _episodes(out)}
    learnt = [i for i in infos if 'skipped' not in i]
    mems = {r[0]: dict(q=r[1], n=r[2]) for r in con.execute('SELECT id, q, n_updates FROM memories')}
    assert len(mems) == len(learnt) == len({i['new_memory'] for i in learnt})   # one write-back per learnt episode
    chain = {i: Q_INIT for i in mems}
    for info in learnt:
        for mid, (old, new) in info['q_updates'].items():
            assert old == pytest.approx(chain[int(mid)]) and new == pytest.approx(mc_update(old, info['reward'], ALPHA))
            chain[int(mid)] = new
    for i, m in mems.items():
        assert m['q'] == pytest.approx(chain[i])
        assert m['n'] == sum(str(i) in info['q_updates'] for info in learnt)    # no update applied twice
    return infos

def test_memrl_resume_after_kill(tmp_path):
    out, n = tmp_path/'run', 16   # 2 families x 4 episodes x 2 epochs
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'}
    env.pop('COVE_MEMRL_SOURCE', None)
    p = subprocess.Popen(_cmd(out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and len(_episodes(out)) < 3: time.sleep(0.02)
    assert p.poll() is None, 'the run finished before it could be killed'
    p.send_signal(signal.SIGKILL); p.wait()
    killed_at = len(_episodes(out))
    assert 0 < killed_at < n
    r = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    eps = _episodes(out)
    assert sorted(e['episode'] for e in eps) == list(range(n))          # each episode exactly once
    assert [e['epoch'] for e in sorted(eps, key=lambda e: e['episode'])] == [0] * 8 + [1] * 8
    assert all(e['memrl']['retrieval']['pool'] == [] for e in eps if e['episode'] < 2)   # the first batch starts empty
    # epoch 1 finds epoch 0's memories
    assert all(e['memrl']['retrieval']['selected'] for e in eps if e['epoch'] == 1)
    _check_memory(out, n)
    m = json.loads((out/'metrics.json').read_text())
    assert m['overall']['n'] == n and m['memory']['size'] == n and m['retrievals'] == n and m['epochs'] == 2
    assert m['summaries'] == n and m['summary_failures'] == m['memory']['digests']
    assert m['q_updates'] == sum(len(e['memrl']['q_updates']) for e in eps) > 0

    # a committed episode whose line was lost (a kill between the memory transaction and the episode write):
    # drop the last two lines; the rerun replays them with the memories they were given, learning nothing twice
    lines = (out/'episodes.jsonl').read_text().splitlines()
    dropped = [json.loads(l) for l in lines[-2:]]
    (out/'episodes.jsonl').write_text('\n'.join(lines[:-2]) + '\n')
    r = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    eps2 = _episodes(out)
    assert sorted(e['episode'] for e in eps2) == list(range(n))
    for d in dropped:
        again = next(e for e in eps2 if e['episode'] == d['episode'])
        assert (again['memrl']['replayed'] and again['retrieved'] == d['retrieved']
                and again['memrl']['key'] == d['memrl']['key'])
    _check_memory(out, n)
    m2 = json.loads((out/'metrics.json').read_text())
    assert (m2['memory'], m2['q_updates'], m2['summaries']) == (m['memory'], m['q_updates'], m['summaries'])
    print(f"killed after {killed_at} episodes; memory {m2['memory']}")


def test_intent_is_the_question(tmp_path):
    "A multi-hop task's memory intent (and retrieval query) is its question, not the ten paragraphs before it."
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.memrl import MemRL
    from cove.spec import open_envs
    cfg = load_config(overrides={'model.name': 'tiny', 'model.max_new_tokens': 8})
    env = open_envs(['multihop'], cfg)['multihop']
    t = env.tasks('test', 1, 0)[0]
    assert t.query == t.payload['question'] and len(t.prompt) > 3 * len(t.query)
    MemRL(cfg, tmp_path, HFPolicy.load('tiny')).run_batch(env, [t])
    con = sqlite3.connect(tmp_path/'memrl.sqlite')
    assert [r[0] for r in con.execute('SELECT intent FROM memories')] == [t.payload['question']]


# --- Phase B as the authors' code does it (issue 28) -------------------------------------------------------------

ALFWORLD, BCB = (0.5187, 0.1203), (0.31, 0.10)   # the authors' fixed similarity statistics (their configs)

def test_phase_b_two_memory_tie():
    "Similarity and Q orders disagree: the pool's z-scores tie at 0 (Phase-A order); the authors' put Q 0.363 first."
    from cove.memrl import phase_b, phase_b_scores
    s, q = [0.932, 0.705], [0.0, 0.363]
    np.testing.assert_allclose(phase_b_scores(s, q, 0.5), [0, 0], atol=1e-12)
    assert phase_b(s, q, 0.5, 2)['selected'].tolist() == [0, 1]
    assert phase_b(s, q, 0.5, 2, 'authors', ALFWORLD)['selected'].tolist() == [1, 0]
    assert phase_b(s, q, 0.5, 2, 'authors', BCB)['selected'].tolist() == [0, 1]   # 0.227 / 0.10 > 2: similarity wins

def test_phase_b_large_pool_outlier():
    "Eleven at sim 0.90 and one at 0.89 with Q 0.9: dropped by the pool's z-scores, injected first by the authors'."
    from cove.memrl import phase_b, q_hat
    s, q = [0.90] * 11 + [0.89], [0.0] * 11 + [0.9]
    assert zscore(s)[-1] == pytest.approx(-np.sqrt(11))
    assert 11 not in phase_b(s, q, 0.5, 3)['selected'].tolist()
    assert phase_b(s, q, 0.5, 3, 'authors', ALFWORLD)['selected'].tolist()[0] == 11
    assert q_hat(q, 'authors')[-1] == 3.0 and q_hat(q)[-1] == pytest.approx(np.sqrt(11))
    q2 = [0.0] * 6 + [0.3] * 5 + [0.9]
    assert phase_b(s, q2, 0.5, 3)['selected'].tolist() == [6, 7, 8]
    assert phase_b(s, q2, 0.5, 3, 'authors', ALFWORLD)['selected'].tolist() == [11, 6, 7]

def test_q_min_and_epsilon_on_a_hand_computed_pool():
    from cove.memrl import phase_b
    s, q = [0.9, 0.8, 0.7], [-0.9, 0.5, -0.5]   # scores 0.1028, 0.6794, -0.7822
    assert phase_b(s, q, 0.5, 2)['selected'].tolist() == [1, 0]
    assert phase_b(s, q, 0.5, 2, q_min=-0.8)['selected'].tolist() == [1, 2]
    assert phase_b(s, q, 0.5, 2, q_min=0.5)['selected'].tolist() == [1]      # Q == q_min is kept
    assert phase_b(s, q, 0.5, 2, q_min=0.6)['selected'].tolist() == []       # all below: nothing injected
    explore = lambda i: phase_b(s, q, 0.5, 1, q_min=-0.8, epsilon=1.0, rng=np.random.default_rng(i))
    picks = {explore(i)['selected'][0] for i in range(100)}
    assert picks == {1, 2}
    assert not phase_b(s, q, 0.5, 1, epsilon=0.0)['explored']
    share = np.mean([phase_b(s, q, 0.5, 1, epsilon=0.1, rng=np.random.default_rng(i))['explored'] for i in range(1000)])
    assert 0.07 <= share <= 0.13

def test_bank_retrieve_is_phase_b(tmp_path):
    "The code that runs, `MemoryBank.retrieve`, chooses what `phase_b` chooses on its pool, for both normalisations."
    from cove.memrl import MemoryBank, phase_b
    rng = np.random.default_rng(0)
    bank = MemoryBank(tmp_path/'m.sqlite', dim=8)
    with bank.transaction():
        for i in range(12):
            bank.insert(f'i{i}', f'e{i}', float(rng.uniform(-1, 1)), rng.normal(size=8) / 3 + np.eye(8)[0])
    qv = np.eye(8)[0]
    for kw in (dict(), dict(norm='authors', sim_stats=BCB), dict(q_min=-0.2)):
        r = bank.retrieve(qv, 0.0, 12, 4, 0.5, **kw)
        b = phase_b(r['sims'], r['q'], 0.5, 4, **kw)
        assert len(r['pool']) == 12 and r['selected'] == [r['pool'][i] for i in b['selected']]


# --- the authors' settings as keys (issue 45) ---------------------------------------------------------------------

def test_reward_keys_llb_hand_computed():
    "LLB: Q_init 0.5, failure reward 0: failures take 0.5 to 0.35 to 0.245, a success 0.35 to 0.545; defaults ±1."
    assert reward(False, 1.0, 0.0) == 0.0 and reward(True) == 1.0 and reward(False) == -1.0
    q = mc_update(0.5, reward(False, 1.0, 0.0), 0.3)
    assert q == pytest.approx(0.35) and mc_update(q, reward(False, 1.0, 0.0), 0.3) == pytest.approx(0.245)
    assert mc_update(q, reward(True, 1.0, 0.0), 0.3) == pytest.approx(0.545)

def test_authors_configs_on_a_hand_computed_pool():
    "Each per-benchmark config, through `MemRLConfig`, injects what its statistics, q_min and k2 give by hand."
    from cove.config import load_config
    from cove.memrl import AUTHORS_CONFIGS, MemRLConfig
    s, q = [0.80, 0.70, 0.60, 0.45], [-0.9, 0.2, 0.8, 1.0]
    want = {'bcb': [1, 2], 'alfworld': [2, 1, 0], 'llb': [2, 1]}
    for name, sel in want.items():
        a = MemRLConfig.from_config(load_config(overrides=AUTHORS_CONFIGS[name]))
        got = two_phase(s, q, a.delta, a.k1, a.k2, a.lam, norm=a.norm, sim_stats=a.sim_moments, q_min=a.q_floor)[1]
        assert got.tolist() == sel, name
    bcb = MemRLConfig.from_config(load_config(overrides=AUTHORS_CONFIGS['bcb']))
    assert (bcb.norm, bcb.sim_moments, bcb.batch) == ('authors', [0.31, 0.1], 25)
    assert bcb.params['sim_stats'] == [0.31, 0.1] and bcb.params['q_min'] == -0.8   # what its memory records

def test_bank_merges_against_the_memory_before_the_batch(tmp_path):
    "`before`: a memory joins only an intent that existed before its batch (the authors' add_memories)."
    from cove.memrl import MemoryBank
    u = lambda *x: np.array(x) / np.linalg.norm(x)
    def intents(before):
        b = MemoryBank(tmp_path/f'm{before}.sqlite', dim=3)
        with b.transaction():
            ids = [b.insert('x', 'e', 0.0, u(1, 0, 0), merge_sim=0.9)]
            ids += [b.insert(i, 'e', 0.0, v, merge_sim=0.9, before=before)
                    for i, v in [('y', u(0, 1, 0)), ('y again', u(0, 1, 0)), ('x again', u(1, 0.05, 0))]]
        return [m['intent_id'] for m in b.get(ids)]
    assert intents(None) == [1, 2, 2, 1] and intents(1) == [1, 2, 3, 1]

def _batched_run(tmp_path, writeback):
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.memrl import MemRL
    from cove.spec import open_envs
    cfg = load_config(overrides={'model.name': 'tiny', 'model.max_new_tokens': 8, 'memrl.merge_sim': -1.0,
                                 'memrl.delta': -1.0, 'memrl.writeback': writeback, 'memrl.batch': 2,
                                 'memrl.q_init': 0.5, 'memrl.reward_failure': 0.0})
    env = open_envs(['math'], cfg)['math']
    (tmp_path/writeback).mkdir()
    m = MemRL(cfg, tmp_path/writeback, HFPolicy.load('tiny'))
    res = m.run_batch(env, env.tasks('test', 4, 0))
    return m, res

def test_writeback_batch_end_to_end(tmp_path):
    """`memrl.writeback=batch`, `memrl.batch=2`, every cosine merging (merge_sim −1): the first flush opens two
    intents (nothing existed before it), the second joins them; one at a time, everything joins memory 1's intent.
    The Q of the memories the second flush injected follows the rewards of `memrl.reward_*` (failure 0) from 0.5."""
    from cove.memrl import mc_update, reward
    m, res = _batched_run(tmp_path, 'batch')
    intents = [r['intent_id'] for r in m.bank.conn.execute('SELECT intent_id FROM memories ORDER BY id')]
    assert intents[:2] == [1, 2] and set(intents[2:]) <= {1, 2}
    infos = [r.extra['memrl'] for r in res]
    assert [i.get('merged_before') for i in infos] == [0, 0, 2, 2]
    assert infos[0]['retrieval']['pool'] == [] and sorted(infos[2]['retrieval']['pool']) == [1, 2]
    q = {1: 0.5, 2: 0.5}
    for i in infos[2:]:
        for mid in i['retrieval']['selected']: q[mid] = mc_update(q[mid], i['reward'], 0.3)
        assert i['reward'] == reward(res[infos.index(i)].success, 1.0, 0.0)
    assert m.bank.q_of([1, 2]) == pytest.approx(q)
    m1, _ = _batched_run(tmp_path, 'episode')
    assert [r[0] for r in m1.bank.conn.execute('SELECT intent_id FROM memories ORDER BY id')] == [1, 1, 1, 1]
