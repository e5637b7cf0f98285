"""The stage-aware trigger against an independent brute-force reading of COVE paper §4.3 (docs/design.md, Trigger) on
random streams, and its resume from JSON."""
import json, random
from fractions import Fraction
import pytest
from cove.router import CHANNELS, PARAMETRIC_CHANNELS
from cove.trigger import CONDITIONS, Trigger, FixedInterval, NoTrigger, make_trigger


def reference_events(stream, w, eps, N, q_min, k, tau_c):
    """The trigger of paper §4.3 recomputed from each family's whole history with exact fractions (issue 40: the gate
    is the family's channel over its last w episodes; a suppressed condition restarts its count); the caller resets
    after every fired event."""
    hist, chans, data_from, plateau_from, updates, out = {}, {}, {}, {}, {}, []
    for fam, s, q, ch in stream:
        h = hist.setdefault(fam, []); h.append((int(s), q))
        c = chans.setdefault(fam, []); c.append(ch)
        held = []
        if len(h) == k and updates.get(fam, 0) == 0 and Fraction(sum(x for x, _ in h[:k]),
                                                                 k) < Fraction(tau_c).limit_denominator(10**6):
            held.append('cold_start_failure')
        if sum(q_ >= q_min for _, q_ in h[data_from.get(fam, 0):]) >= N: held.append('data_sufficient')
        since = h[plateau_from.get(fam, 0):]
        if len(since) >= 2*w:
            vals = [x for x, _ in since]
            if Fraction(sum(vals[-w:]) - sum(vals[-2*w:-w]), w) < Fraction(eps).limit_denominator(10**6):
                held.append('plateau')
        if held:
            fired = 2 * sum(x in PARAMETRIC_CHANNELS for x in c[-w:]) >= len(c[-w:])
            out.append((fam, len(h), tuple(held), fired))
            if fired: data_from[fam], plateau_from[fam], updates[fam] = len(h), len(h), updates.get(fam, 0) + 1
            if not fired and 'data_sufficient' in held: data_from[fam] = len(h)
            if not fired and 'plateau' in held: plateau_from[fam] = len(h)
    return out


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
    assert got == reference_events(stream, **params)


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
    t = Trigger(w=4, eps=-1.0, N=1, q_min=1.0, k=10**6)       # eps = -1: no plateau; every 1.0 is data sufficient
    harness = [(True, 1.0, 'harness_only')] * 3
    assert _play(t, 'tableqa', harness + [(True, 1.0, 'parametric_candidate')]) == []
    ev = t.events[-1]
    assert (ev.episode, ev.channel) == (4, 'parametric_candidate')
    assert (ev.family_channel, ev.parametric_share) == ('harness_only', 0.25)
    assert t.stats['suppressed'] == 4 and t.stats['fired'] == 0
    assert _play(t, 'tableqa', [(True, 1.0, 'hybrid')]) == [1]        # 2 of the last 4: the family is parametric now
    assert t.events[-1].family_channel == 'hybrid'

def test_suppressed_data_sufficient_needs_fresh_trajectories():
    "Issue 40: a suppressed DataSufficient restarts |D_q|; it does not stay live until the next parametric episode."
    t = Trigger(w=2, eps=-1.0, N=3, q_min=1.0, k=10**6)
    assert _play(t, 'math', [(True, 1.0, 'harness_only')] * 4) == []
    assert [(e.episode, e.fired) for e in t.events] == [(3, False)]   # not again at the 4th
    assert t.state('math').n_hq == 1 and t.state('math').since_update == 4
    fired = _play(t, 'math', [(True, 1.0, 'parametric_candidate')] * 2)
    assert fired == [2] and t.events[-1].episode == 6                  # 3 fresh ones (4th, 5th, 6th), family parametric
    assert t.events[-1].numbers['data_sufficient']['n_hq'] == 3

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

def test_a_state_without_channels_loads():
    "A state written before issue 40 (no `channels`, no `since_plateau`) resumes: the plateau counts from the update."
    t = Trigger(w=2, N=10**6, k=10**6)
    _play(t, 'f', [(True, 1.0, 'hybrid'), (False, 0.0, 'hybrid'), (True, 1.0, 'hybrid')])
    old = json.loads(json.dumps(t.state_dict()))
    for f in old['families'].values(): del f['channels'], f['since_plateau']
    for e in old['events']: del e['family_channel'], e['parametric_share']
    back = Trigger(w=2, N=10**6, k=10**6).load_state_dict(old)
    assert back.state('f').since_plateau == 3 and back.state('f').channels == []
    assert back.observe('f', False, 0.0, 'hybrid').condition == 'plateau'
