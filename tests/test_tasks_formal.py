"""The `formal` family: MiniF2F loader, proof extraction, pre-Lean rejection, and the Lean verifier (skipped without
Lean)."""
import shutil
from pathlib import Path
import pytest
from cove.core import Feedback
from cove.tasks.base import DataUnavailable, make_env
from cove.tasks.formal import (LEAN_UNAVAILABLE, MiniF2FEnv, banned_reason, extract_proof, find_lean, parse_lean_file)

HAVE_LEAN = find_lean() is not None
SRC = ("import Mathlib\n\nset_option maxHeartbeats 0\n\nopen Real\n\ntheorem toy_p1 (x : ℝ) (h₀ : x = 2) :\n"
       "  x + 1 = 3 := by sorry")

def episode(env, task, *answers):
    st = env.reset(task)
    for a in answers:
        if env.step(st, a) is None: break
    return env.evaluate(st)

@pytest.fixture
def fixture_env(tmp_path):
    v = tmp_path/'minif2f-lean4'/'valid'; v.mkdir(parents=True)
    (v/'toy_p1.lean').write_text(SRC)
    (v/'toy_p2.lean').write_text(SRC.replace('toy_p1', 'toy_p2'))
    (v/'broken.lean').write_text('import Mathlib\n-- no theorem here\n')
    (v/'two.lean').write_text(SRC + '\n\ntheorem other : 1 = 1 := by sorry')
    return MiniF2FEnv(data_dir=tmp_path)

def test_registry():
    assert isinstance(make_env('formal:minif2f'), MiniF2FEnv)
    assert isinstance(make_env('formal'), MiniF2FEnv)   # its only source needs no suffix
    with pytest.raises(ValueError, match='unknown source'): make_env('formal:lean3')

def test_loader_fixture(fixture_env):
    ts = fixture_env.tasks('all')
    r = fixture_env.report
    assert (len(ts), r.n_ok, r.n_bad) == (2, 2, 2)
    assert any('no theorem' in e for e in r.errors) and any('more than one theorem' in e for e in r.errors)
    t = ts[0]
    assert t.payload['name'] == 'toy_p1' and t.payload['statement'].endswith('x + 1 = 3') and 'sorry' not in t.prompt
    assert t.meta == {'source': 'minif2f', 'folder': 'valid', 'file': 'toy_p1.lean'}
    assert fixture_env.reference(t) is None

def test_loader_missing(tmp_path):
    with pytest.raises(DataUnavailable): MiniF2FEnv(data_dir=tmp_path/'nowhere').tasks()
    (tmp_path/'minif2f-lean4').mkdir()
    with pytest.raises(DataUnavailable, match='no valid'): MiniF2FEnv(data_dir=tmp_path).tasks()

def test_real_statements():
    env = MiniF2FEnv()
    try: ts = env.tasks('all')
    except DataUnavailable as e: pytest.skip(f'MiniF2F data not present: {e}')
    assert (len(ts), env.report.n_bad) == (244, 0)
    assert len(env.tasks('train')) + len(env.tasks('test')) == 244
    assert all(t.payload['statement'].startswith('theorem ') and 'sorry' not in t.payload['statement'] for t in ts)
    assert len({t.id for t in ts}) == 244

def test_sorry_and_admit_rejected_without_lean(fixture_env):
    t = fixture_env.tasks('all')[0]
    for bad, why in [("```lean\nby\n  sorry\n```", '`sorry`'), ("by admit", '`admit`'),
                     ("by\n  norm_num\n#exit", 'a `#` command'), ("by\n  native_decide", '`native_decide`'),
                     ("by\n  exact absurd\naxiom cheat : False", 'new declaration')]:
        fb = episode(fixture_env, t, bad)
        assert fb.status == 'failure' and fb.message.startswith('rejected before Lean') and why in fb.message, (bad, fb)
    assert banned_reason('by\n  nlinarith [sq_nonneg (x - 2), h₀]') is None

def test_extract_proof():
    assert (extract_proof("```lean4\ntheorem toy_p1 (x : ℝ) (h₀ : x = 2) :\n  x + 1 = 3 := by\n"
                          "  subst h₀; norm_num\n```", 'toy_p1') == 'by\n  subst h₀; norm_num')
    assert extract_proof("linarith") == 'by\n  linarith'
    assert extract_proof("   ") is None

@pytest.mark.skipif(HAVE_LEAN, reason='Lean is installed here: the unavailable path does not apply')
def test_unavailable_without_lean(fixture_env):
    assert fixture_env.available() == (False, LEAN_UNAVAILABLE)
    assert LEAN_UNAVAILABLE == ("Lean 4 toolchain not found on PATH (need `lean`/`lake` with Mathlib); formal family "
                                "unavailable")
    t = fixture_env.tasks('all')[0]
    assert episode(fixture_env, t,
                   "```lean\nby\n  subst h₀\n  norm_num\n```") == Feedback('error', 0.0, LEAN_UNAVAILABLE,
                                                                           'unavailable')
    assert fixture_env.evaluate(fixture_env.reset(t)) == Feedback('failure', 0.0, 'no proof within 1 turn(s)',
                                                                  'no_answer')

@pytest.mark.skipif(not HAVE_LEAN,
                    reason='no Lean 4 toolchain on PATH (`lean`/`lake`): the Lean verifier cannot run on this machine')
def test_lean_verifier(fixture_env):
    "Needs Lean 4 with Mathlib (set COVE_LEAN_PROJECT to a Lake project with Mathlib)."
    ok, why = fixture_env.available()
    if not ok: pytest.skip(why)
    t = fixture_env.tasks('all')[0]
    assert episode(fixture_env, t, "```lean\nby\n  subst h₀\n  norm_num\n```").success
    fb = episode(fixture_env, t, "```lean\nby\n  norm_num\n```")
    assert fb.status == 'failure' and 'Lean error' in fb.message
