"""The stage-aware trigger against an independent brute-force reading of COVE paper §4.3 (docs/design.md, Trigger) on
random streams, and its resume from JSON."""
import json, random
from fractions import Fraction
import pytest
from cove.router import CHANNELS, PARAMETRIC_CHANNELS
from cove.trigger import CONDITIONS, Trigger, FixedInterval, NoTrigger, make_trigger


def reference_events(stream, w, eps, N, q_min, k, tau_c):
    """The trigger of paper §4.3 recomputed from each family's whole history with exact fractions (issue 40: the gate
    is the family's channel over its last w episodes; a suppressed plateau restarts its windows. Issue 53: |D_q| counts
    high-quality parametric-routed episodes since the update; ColdStartFailure is armed from the k-th episode until an
    update; a suppression whose conditions were all logged suppressed since the update is not logged again;
    DataSufficient passes the family gate, its episodes each routed parametric); the
    caller resets after every fired event. Returns the events and, per family, the trainable episodes left over."""
    hist, plateau_from, update_at, updates, logged, out = {}, {}, {}, {}, {}, []
    trainable = lambda q, ch: q >= q_min and ch in PARAMETRIC_CHANNELS
    for fam, s, q, ch in stream:
        h = hist.setdefault(fam, []); h.append((int(s), q, ch))
        held = []
        first = [x for x, _, _ in h[:k]]
        cold = Fraction(sum(first), k) < Fraction(tau_c).limit_denominator(10**6)
        if len(h) >= k and updates.get(fam, 0) == 0 and cold: held.append('cold_start_failure')
        if sum(trainable(q_, ch_) for _, q_, ch_ in h[update_at.get(fam, 0):]) >= N: held.append('data_sufficient')
        since = h[plateau_from.get(fam, 0):]
        if len(since) >= 2*w:
            vals = [x for x, _, _ in since]
            if Fraction(sum(vals[-w:]) - sum(vals[-2*w:-w]), w) < Fraction(eps).limit_denominator(10**6):
                held.append('plateau')
        if not held: continue
        chans = [c for _, _, c in h[-w:]]
        fired = 2 * sum(c in PARAMETRIC_CHANNELS for c in chans) >= len(chans) or 'data_sufficient' in held
        seen = logged.setdefault(fam, set())
        if fired or not set(held) <= seen: out.append((fam, len(h), tuple(held), fired))
        if fired:
            update_at[fam], plateau_from[fam], logged[fam] = len(h), len(h), set()
            updates[fam] = updates.get(fam, 0) + 1
        else:
            seen |= {c for c in held if c != 'plateau'}
            if 'plateau' in held: plateau_from[fam] = len(h)
    left = {f: sum(trainable(q, ch) for _, q, ch in h[update_at.get(f, 0):]) for f, h in hist.items()}
    return out, left


@pytest.mark.parametrize('seed', range(40))
def test_trigger_matches_reference(seed):
    rng = random.Random(seed)
    params = dict(w=rng.choice([2, 3, 5]), eps=rng.choice([0.01, 0.15, 0.3]), N=rng.choice([2, 4, 7]),
                  q_min=rng.choice([0.5, 1.0]), k=rng.choice([3, 4, 6]), tau_c=rng.choice([0.05, 0.3, 0.55]))
    p = rng.random()
    stream = [(rng.choice('abc'), rng.random() < p, rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]), rng.choice(CHANNELS))
              for _ in range(150)]
    trig, got = Trigger(**params), []
    for fam, s, q, ch in stream:
        n = len(trig.events)
        ev = trig.observe(fam, s, q, ch)
        assert len(trig.events) in (n, n + 1)
        if len(trig.events) == n + 1:
            e = trig.events[-1]
            assert (ev is e) if e.fired else ev is None
            assert e.condition == e.conditions[0] and e.conditions == [c for c in CONDITIONS if c in e.conditions]
            got.append((fam, e.episode, tuple(e.conditions), e.fired))
        else: assert ev is None
        if ev is not None: trig.reset_after_update(fam)
    events, left = reference_events(stream, **params)
    assert got == events and trig.untrained_counts() == left


def test_resume_mid_stream_from_json():
    rng = random.Random(7)
    stream = [(rng.choice('ab'), rng.random() < 0.5, rng.random(), rng.choice(CHANNELS)) for _ in range(200)]
    params = dict(w=4, eps=0.01, N=6, q_min=0.8, k=5, tau_c=0.3)
    def play(trig, part):
        out = []
        for fam, s, q, ch in part:
            ev = trig.observe(fam, s, q, ch)
            out.append(ev and (ev.episode, ev.condition))
            if ev: trig.reset_after_update(fam)
        return out
    whole = play(Trigger(**params), stream)
    for cut in (1, 57, 133):
        t = Trigger(**params); head = play(t, stream[:cut])
        state = json.loads(json.dumps(t.state_dict()))
        assert head + play(Trigger(**params).load_state_dict(state), stream[cut:]) == whole
    assert any(whole)


def test_ablations_and_factory():
    fi = FixedInterval(every=5)
    fired = [i+1 for i in range(12) if fi.observe('x', False, 0.0, 'parametric_candidate')]
    assert fired == [5, 10]
    nt = NoTrigger()
    assert not any(nt.observe('x', False, 0.0, 'hybrid') for _ in range(100))
    assert make_trigger('cove', {'N': 3}).N == 3 and make_trigger('fixed_interval', {'w': 6}).every == 12
    with pytest.raises(ValueError, match='unknown trigger'): make_trigger('sometimes')


def _play(trig, family, items):
    "Observe `(success, score, channel)` items of one family; the 1-based indices (within `items`) that fired."
    return [i + 1 for i, (s, q, ch) in enumerate(items) if trig.observe(family, s, q, ch)]

def test_one_parametric_episode_in_a_harness_family_does_not_fire():
    "Issue 40: the gate is the family's routing over its last w episodes, not one episode's channel."
    t = Trigger(w=4, eps=-1.0, N=10**6, q_min=1.0, k=1, tau_c=0.5)   # only ColdStartFailure, armed from episode 1
    harness = [(False, 0.0, 'harness_only')] * 3
    assert _play(t, 'tableqa', harness + [(False, 0.0, 'parametric_candidate')]) == []
    assert [(e.episode, e.condition, e.fired) for e in t.events] == [(1, 'cold_start_failure', False)]
    assert t.stats['suppressed_again'] == 3                          # held at 2-4, logged once
    assert _play(t, 'tableqa', [(False, 0.0, 'hybrid')]) == [1]      # 2 of the last 4: the family is parametric now
    assert (t.events[-1].family_channel, t.events[-1].parametric_share) == ('hybrid', 0.5)

def test_data_sufficient_passes_the_family_gate():
    "Issue 53: each episode DataSufficient counts was routed parametric itself: a mostly-harness family trains them."
    t = Trigger(w=4, eps=-1.0, N=2, q_min=1.0, k=10**6)
    items = [(True, 1.0, 'hybrid')] + [(False, 0.0, 'harness_only')] * 3 + [(True, 1.0, 'hybrid')]
    assert _play(t, 'math', items) == [5]
    ev = t.events[-1]
    assert (ev.condition, ev.family_channel, ev.numbers['data_sufficient']['n_trainable']) == (
        'data_sufficient', 'harness_only', 2)
    t.reset_after_update('math')
    assert (t.untrained('math'), t.state('math').suppressed) == (0, [])

def test_data_sufficient_counts_only_parametric_routed_successes():
    "Issue 53: tableqa's event counted 13 high-quality episodes when 1 was trainable."
    t = Trigger(w=4, eps=-1.0, N=2, q_min=1.0, k=10**6)
    items = [(True, 1.0, 'harness_only')] * 13 + [(True, 1.0, 'parametric_candidate'), (True, 0.5, 'hybrid'),
                                                  (False, 0.0, 'hybrid')]
    assert _play(t, 'tableqa', items) == [] and t.events == []
    ds = t.data_sufficient('tableqa')
    assert (ds['holds'], ds['n_trainable'], ds['n_hq']) == (False, 1, 14) and t.untrained('tableqa') == 1
    assert _play(t, 'tableqa', [(True, 1.0, 'hybrid')]) == [1]
    assert t.events[-1].condition == 'data_sufficient' and t.events[-1].numbers['data_sufficient']['n_trainable'] == 2

@pytest.mark.parametrize('warmup', range(0, 9))
def test_cold_start_reachable_behind_the_router_warmup(warmup):
    "Issue 53: the router sends a family's first `warmup` episodes to memory; with k=3 the cold start still fires."
    t = Trigger(w=4, eps=-1.0, N=10**6, k=3, tau_c=0.05)
    chans = ['harness_only'] * warmup + ['parametric_candidate'] * 6
    fired = _play(t, 'code', [(False, 0.0, ch) for ch in chans])
    first_parametric = next(i + 1 for i in range(len(chans))         # the family's window is half parametric
                            if i + 1 >= 3 and 2 * sum(c != 'harness_only' for c in chans[max(0, i - 3):i + 1])
                            >= len(chans[max(0, i - 3):i + 1]))
    assert fired[:1] == [first_parametric] and t.events[-1].condition == 'cold_start_failure'
    assert sum(e.suppressed for e in t.events) == (1 if first_parametric > 3 else 0)   # logged once, not per episode
    t.reset_after_update('code')
    assert _play(t, 'code', [(False, 0.0, 'hybrid')] * 5) == []                    # the update disarms it

def test_demo_case_k3_after_four_harness_episodes():
    t = Trigger(w=4, eps=-1.0, N=10**6, k=3, tau_c=0.05)
    assert _play(t, 'code', [(False, 0.0, 'harness_only')] * 4 + [(False, 0.0, 'parametric_candidate')] * 2) == [6]
    assert [(e.episode, e.fired) for e in t.events] == [(3, False), (6, True)]
    assert t.stats['suppressed_again:cold_start_failure'] == 2
    ok = Trigger(w=4, eps=-1.0, N=10**6, k=3, tau_c=0.05)                           # a family that succeeds early
    assert _play(ok, 'code', [(True, 1.0, 'harness_only')] * 4 + [(False, 0.0, 'hybrid')] * 4) == []

def test_leftover_count_per_family():
    t = Trigger(w=3, eps=-1.0, N=3, q_min=1.0, k=10**6)
    _play(t, 'math', [(True, 1.0, 'hybrid')] * 3 + [(True, 1.0, 'hybrid'), (True, 1.0, 'harness_only')])
    _play(t, 'code', [(True, 1.0, 'harness_only')] * 4)
    assert t.untrained_counts() == {'math': 4, 'code': 0}         # nothing reset: 4 hybrid successes left over
    t.reset_after_update('math')
    _play(t, 'math', [(True, 1.0, 'parametric_candidate'), (True, 1.0, 'harness_only')])
    assert (t.untrained('math'), t.untrained('unseen')) == (1, 0)
    assert all(v < t.w for v in t.untrained_counts().values())
    nt = make_trigger('no_trigger', {'q_min': 0.5})
    _play(nt, 'math', [(False, 0.5, 'hybrid'), (False, 0.4, 'hybrid')])
    assert nt.untrained('math') == 1


def test_suppressed_plateau_restarts_its_windows_not_since_update():
    t = Trigger(w=2, eps=0.01, N=10**6, k=10**6)
    assert _play(t, 'f', [(False, 0.0, 'harness_only')] * 5) == []
    assert [e.episode for e in t.events] == [4]                        # then 2w fresh episodes are needed
    st = t.state('f')
    assert (st.since_update, st.since_plateau, st.recent) == (5, 1, [0.0])
    assert _play(t, 'f', [(False, 0.0, 'hybrid')] * 3) == [3]          # the 8th episode: 4 since the restart

def test_family_channel_over_the_window():
    t = Trigger(w=4)
    for ch in ['hybrid', 'harness_only', 'parametric_candidate', 'parametric_candidate', 'harness_only']:
        t.observe('code', False, 0.0, ch)
    assert t.state('code').channels == ['harness_only', 'parametric_candidate', 'parametric_candidate', 'harness_only']
    assert (t.parametric_share('code'), t.family_channel('code')) == (0.5, 'parametric_candidate')
    t.observe('code', False, 0.0, 'harness_only')
    assert t.family_channel('code') == 'parametric_candidate'          # [P, P, H, H]: still half
    t.observe('code', False, 0.0, 'harness_only')
    assert t.family_channel('code') == 'harness_only' and t.family_channel('unseen') == 'harness_only'

def test_state_round_trip_of_the_new_fields():
    "n_trainable, suppressed and suppressed_again survive JSON; an ablation's state with other thresholds is refused."
    t = Trigger(w=4, eps=-1.0, N=2, k=3)
    _play(t, 'f', [(False, 0.0, 'harness_only')] * 4 + [(True, 1.0, 'hybrid')])
    sd = json.loads(json.dumps(t.state_dict()))
    assert sd['families']['f']['suppressed'] == ['cold_start_failure'] and sd['families']['f']['n_trainable'] == 1
    back = Trigger(w=4, eps=-1.0, N=2, k=3).load_state_dict(sd)
    assert back.state_dict() == t.state_dict()
    rest = [(True, 1.0, 'hybrid'), (False, 0.0, 'parametric_candidate')]
    assert _play(back, 'f', rest) == _play(t, 'f', rest) == [1, 2]     # no reset here: it holds again at the 7th
    no_ts = lambda s: {**s, 'events': [{k: v for k, v in e.items() if k != 'ts'} for e in s['events']]}
    assert no_ts(back.state_dict()) == no_ts(t.state_dict())             # the same, but when each event was logged
    fi = FixedInterval(every=3)
    _play(fi, 'f', [(True, 1.0, 'hybrid')] * 4)
    sd = json.loads(json.dumps(fi.state_dict()))
    assert FixedInterval(3).load_state_dict(sd).untrained('f') == fi.untrained('f')
    with pytest.raises(ValueError, match='parameters'): FixedInterval(3, q_min=0.5).load_state_dict(sd)
