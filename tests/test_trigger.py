"The stage-aware trigger against an independent brute-force reading of SPEC §5 on random streams, and its resume from JSON."
import json, random
from fractions import Fraction
import pytest
from cove.router import CHANNELS, PARAMETRIC_CHANNELS
from cove.trigger import CONDITIONS, Trigger, FixedInterval, NoTrigger, make_trigger


def reference_events(stream, w, eps, N, q_min, k, tau_c):
    "SPEC §5 recomputed from each family's whole history with exact fractions; the caller resets after every fired event."
    hist, last_reset, updates, out = {}, {}, {}, []
    for fam, s, q, ch in stream:
        h = hist.setdefault(fam, []); h.append((int(s), q))
        since = h[last_reset.get(fam, 0):]
        held = []
        if len(h) == k and updates.get(fam, 0) == 0 and Fraction(sum(x for x, _ in h[:k]), k) < Fraction(tau_c).limit_denominator(10**6): held.append('cold_start_failure')
        if sum(q_ >= q_min for _, q_ in since) >= N: held.append('data_sufficient')
        if len(since) >= 2*w:
            vals = [x for x, _ in since]
            if Fraction(sum(vals[-w:]) - sum(vals[-2*w:-w]), w) < Fraction(eps).limit_denominator(10**6): held.append('plateau')
        if held:
            fired = ch in PARAMETRIC_CHANNELS
            out.append((fam, len(h), tuple(held), fired))
            if fired: last_reset[fam], updates[fam] = len(h), updates.get(fam, 0) + 1
    return out


@pytest.mark.parametrize('seed', range(40))
def test_trigger_matches_reference(seed):
    rng = random.Random(seed)
    params = dict(w=rng.choice([2, 3, 5]), eps=rng.choice([0.01, 0.15, 0.3]), N=rng.choice([2, 4, 7]),
                  q_min=rng.choice([0.5, 1.0]), k=rng.choice([3, 4, 6]), tau_c=rng.choice([0.05, 0.3, 0.55]))
    p = rng.random()
    stream = [(rng.choice('abc'), rng.random() < p, rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]), rng.choice(CHANNELS)) for _ in range(150)]
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
