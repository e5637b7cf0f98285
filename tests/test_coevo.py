"""CoEvo-Mem (`cove.coevo`): the equations on hand-computed cases, and a `cove run --method coevo` killed with SIGKILL
that resumes with exactly N unique episodes and no update applied twice."""
import json, math, os, sqlite3, subprocess, sys
from pathlib import Path
import numpy as np
import pytest, torch
from cove.coevo import (rrf_scores, pool_ranks, hybrid_retrieve, td_residuals, traversal_steps, path_credit, propagate,
                        apply_q, ema_step, router_loss, ResidualRouter, smooth_prior, parse_srqr, phase_kind)

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = [sys.executable, '-c', 'import sys, cove.coevo; from cove.cli import main; sys.exit(main(sys.argv[1:]))']
RHO = {'dense': 0.5, 'sparse': 0.4, 'time': 0.8}

def test_rrf_with_q_term():
    # η=1, λ_Q=1, w=(.75,.25): dense ranks (1,2,3) and (2,1,3); sparse ranks 2,1 and node 3 absent (no shared term); Q
    # ranks 2,2,1
    rs = {'d': [{1: .9, 2: .5, 3: .1}, {1: .4, 2: .8, 3: .2}], 's': [{1: 1.0, 2: 2.0}]}
    S = rrf_scores([1, 2, 3], rs, {1: .5, 2: .5, 3: .9}, {'d': .75, 's': .25}, eta=1.0, lam_q=1.0)
    assert S[1] == pytest.approx(.75 * .5 * (1/2 + 1/3) + .25 / 3 + 1/3)
    assert S[2] == pytest.approx(.75 * .5 * (1/3 + 1/2) + .25 / 2 + 1/3)
    assert S[3] == pytest.approx(.75 * .5 * (1/4 + 1/4) + 0 + 1/2)
    # ranks within the pool, 1-based, ties share
    assert pool_ranks({1: .5, 2: .5, 3: .9, 4: 1.0}, [1, 2, 3]) == {1: 2, 2: 2, 3: 1}

def test_temporal_expansion_recomputes_on_expanded_pool():
    ids = [10, 11, 12, 13]
    A, info = hybrid_retrieve(ids, [np.array([.9, .8, .1, 0.])], [np.array([0., 1.5, 0., 0.])],
                              {10: .5, 11: .5, 12: .5, 13: 1.}, {'d': .5, 's': .5}, {10: {13}}, eta=1, lam_q=5.0, k=2,
                              depth=2)
    assert info['pool0'] == [10, 11] and info['pool'] == [10, 11, 13] and A == [13, 11]

def test_td_residuals_and_synchronous_clipped_update():
    q = {1: .2, 2: .6, 3: .9}
    q_hat, d = td_residuals([1, 2], {1: .5, 2: 0.}, 1.0, q, .9, .5)
    assert q_hat == pytest.approx(.4) and d[1] == pytest.approx(.66) and d[2] == pytest.approx(-.24)
    assert td_residuals([], {}, 1.0, q, .9, .37)[0] == .37
    new = apply_q({1: .3, 2: .9, 3: .05}, {2: .5, 3: -.2, 1: .085}, .3, 0., 1.)
    assert new == pytest.approx({2: 1.0, 3: 0.0, 1: .3 + .3 * .085})

def test_path_credit_max_forward_time_depth():
    st = traversal_steps([(1, 2, 'dense'), (2, 3, 'time'), (4, 1, 'time')])
    assert path_credit(st, 3, RHO, 2) == pytest.approx({2: .8, 1: .4})
    assert path_credit(st, 3, RHO, 3) == pytest.approx({2: .8, 1: .4, 4: .32})     # depth bound
    assert 3 not in path_credit(st, 1, RHO, 3)                                       # Time edges only forward
    st2 = traversal_steps([(5, 2, 'dense'), (2, 3, 'dense'), (5, 3, 'sparse')])
    assert path_credit(st2, 3, RHO, 2)[5] == pytest.approx(.4)                       # max over paths, not a sum
    rel = propagate({2: .5, 3: -.2}, traversal_steps([(1, 2, 'dense'), (1, 3, 'sparse'), (2, 3, 'dense')]), RHO, 1)
    assert rel == pytest.approx({1: (.5 * .5 + .4 * -.2) / 2})

def test_router_starts_at_prior_and_ema():
    pb = torch.tensor(smooth_prior([.8, .2], .1))
    r = ResidualRouter(seed=3)
    with torch.no_grad(): pi = r(torch.randn(384, dtype=torch.float64), pb, torch.tensor(.7))
    assert torch.allclose(pi, pb, atol=1e-12, rtol=0)
    B, A = ema_step(.2, 1.0, .1)
    assert (B, A) == pytest.approx((.28, .8))
    l = router_loss(pb.clone().requires_grad_(), pb, .5, 0.0, 10., .01)
    assert float(l.detach()) == pytest.approx(0.0, abs=1e-12)   # Â = 0 and π = p̄⁰: zero loss

def test_srqr_fallback_and_schedule():
    s = parse_srqr('garbage garbage', 'Q?')
    assert (s.dense, s.sparse, s.prior, s.xi, s.status) == (['Q?'], ['Q?'], (.5, .5), 0.0, 'unparseable')
    assert [phase_kind(r, 'alternate', True) for r in range(3)] == ['memory', 'router', 'memory']

# --- resume after SIGKILL ------------------------------------------------------------------------------------------

def _cmd(out):
    return LAUNCH + ['run', '--method', 'coevo', '--tasks', 'math,tableqa', '--episodes', '2', '--split', 'train',
                     # a phase per pass: epoch 1 Memory, epoch 2 Router
                     '--model', 'tiny', '--set', 'run.epochs=2', '--set', 'coevo.phase_len=0',
                     '--set', 'model.batch_size=4', '--set', 'model.max_new_tokens=8', '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def _state(out):
    con = sqlite3.connect(Path(out)/'coevo.sqlite')
    try:
        applied = {k: json.loads(v) for k, v in con.execute('SELECT key, info FROM applied')}
        q = dict(con.execute('SELECT id, q FROM nodes'))
        qlog = con.execute('SELECT step, node, kind FROM qlog').fetchall()
        st = json.loads(con.execute("SELECT value FROM meta WHERE key='state'").fetchone()[0])
        router = con.execute("SELECT value FROM blobs WHERE key='router'").fetchone()
        assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
        return applied, q, qlog, st, router[0] if router else None
    finally: con.close()

def _run(out, kill_after=None):
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'}
    if kill_after: env['COVE_COEVO_KILL_AFTER'] = str(kill_after)
    return subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)

def test_coevo_resume_after_kill(tmp_path):
    n = 8   # 2 families × 2 tasks × 2 epochs: phase 0 = Memory, phase 1 = Router
    out = tmp_path/'run'
    # SIGKILL right after the 3rd commit (mid-chunk: 3 updates committed, none of the chunk's episode lines written),
    # then after the 7th (inside the router phase), then finish
    for k in (3, 7):
        r = _run(out, kill_after=k)
        assert r.returncode == -9, (r.returncode, r.stderr[-2000:])
        assert len(_state(out)[0]) == k and len(_episodes(out)) < k
    r = _run(out); assert r.returncode == 0, r.stderr[-3000:]
    eps = _episodes(out)
    assert sorted(e['episode'] for e in eps) == list(range(n))                  # each episode exactly once
    assert sum(e['coevo_replay'] for e in eps) >= 2                             # some were replays of applied updates
    applied, q, qlog, st, router = _state(out)
    assert len(applied) == n and sorted(a['step'] for a in applied.values()) == list(range(n))
    mem = [a for a in applied.values() if a['kind'] == 'memory']
    # one node per memory-phase episode
    assert len(mem) == 4 and len(q) == 4 and sum(k == 'new' for _, _, k in qlog) == 4
    assert st['counts']['router_updates'] == 4 and st['counts']['memory_updates'] == 4
    # the EMA baseline saw each router reward once
    B = 0.0
    for a in sorted(applied.values(), key=lambda a: a['step']):
        if a['kind'] == 'router': B = (1 - .1) * B + .1 * a['R']
    assert st['B'] == pytest.approx(B)
    m = json.loads((out/'metrics.json').read_text())
    assert m['overall']['n'] == n and m['coevo']['applied'] == n and m['coevo']['nodes'] == 4
    # Q changed only in memory steps, once per node and step
    steps_mem = {a['step'] for a in mem}
    assert {s for s, _, _ in qlog} <= steps_mem and len({(s, nd) for s, nd, _ in qlog}) == len(qlog)
    assert sum(len(a['A']) for a in mem) == sum(k == 'exposed' for _, _, k in qlog)
    # finished: a rerun adds nothing
    r = _run(out); assert r.returncode == 0, r.stderr[-3000:]
    assert len(_episodes(out)) == n and len(_state(out)[0]) == n


def test_default_schedule_alternates_within_one_pass(tmp_path):
    """One epoch at the defaults: phases of coevo.phase_len = 8 episodes alternate Memory, Router, Memory, so the router
    trains."""
    out = tmp_path/'run'
    cmd = LAUNCH + ['run', '--method', 'coevo', '--tasks', 'math', '--episodes', '20', '--split', 'train', '--model',
                    'tiny', '--set', 'model.batch_size=4', '--set', 'model.max_new_tokens=8', '--out', str(out),
                    '--quiet']
    r = subprocess.run(cmd, cwd=ROOT, env={**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    applied, _, _, st, router = _state(out)
    kinds = [a['kind'] for a in sorted(applied.values(), key=lambda a: a['step'])]
    assert kinds == ['memory'] * 8 + ['router'] * 8 + ['memory'] * 4, kinds
    assert st['counts']['router_updates'] == 8 and router is not None
