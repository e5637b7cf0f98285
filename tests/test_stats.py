"cove.stats against published values and against scipy, its refusals, and that it keeps `cove` light to import."
import json, math, os, subprocess, sys
from pathlib import Path
import pytest
from scipy.stats import binomtest
from cove import core
from cove.stats import wilson, rate_ci, newcombe_paired, mcnemar_p, mde, paired, align, episode_records, paired_rows

ROOT = Path(__file__).resolve().parents[1]

# Newcombe (1998a) "Two-sided confidence intervals for the single proportion", Stat Med 17:857 (method 3, no correction)
@pytest.mark.parametrize('k,n,ci', [(15, 148, (0.0624, 0.1605)), (0, 20, (0.0, 0.1611)), (1, 29, (0.0061, 0.1718))])
def test_wilson_published(k, n, ci):
    assert wilson(k, n) == pytest.approx(ci, abs=5e-5)

@pytest.mark.parametrize('k,n', [(0, 64), (8, 16), (64, 64), (37, 96), (1, 3)])
def test_wilson_matches_scipy(k, n):
    r = binomtest(k, n).proportion_ci(confidence_level=0.95, method='wilson')
    assert wilson(k, n) == pytest.approx((r.low, r.high), abs=1e-9)
    r99 = binomtest(k, n).proportion_ci(confidence_level=0.99, method='wilson')
    assert wilson(k, n, alpha=0.01) == pytest.approx((r99.low, r99.high), abs=1e-9)

def test_wilson_edges():
    assert wilson(0, 0) == (None, None)
    assert rate_ci(4, 16) == '0.250 [0.102, 0.495] (n=16)' and rate_ci(0, 0) == 'n/a (n=0)'
    with pytest.raises(ValueError, match='0 <= k <= n'): wilson(5, 4)
    with pytest.raises(ValueError, match='0 <= k <= n'): wilson(-1, 4)

# Newcombe (1998b) "Improved confidence intervals for the difference between binomial proportions based on paired
# data", Stat Med 17:2635: method 10 on his worked example (Armitage and Berry's culture media, 20/12/2/16) and, as
# Fagerland, Lydersen and Laake (2014) give it, on the Bentur et al. (2009) data (1/1/7/12)
@pytest.mark.parametrize('table,ci,eps', [((20, 12, 2, 16), (0.0562, 0.3292), 5e-5),
                                          ((1, 1, 7, 12), (-0.507, -0.026), 5e-4)])
def test_newcombe_method_10_published(table, ci, eps):
    assert newcombe_paired(*table) == pytest.approx(ci, abs=eps)

def test_newcombe_contains_the_difference_and_stays_in_range():
    for t in [(0, 0, 0, 5), (5, 0, 0, 0), (0, 5, 0, 0), (0, 0, 5, 0), (3, 2, 1, 4), (40, 12, 4, 40)]:
        lo, hi = newcombe_paired(*t)
        d = (t[1] - t[2]) / sum(t)
        assert -1 <= lo <= d <= hi <= 1, (t, lo, hi)
    with pytest.raises(ValueError, match='n > 0'): newcombe_paired(0, 0, 0, 0)

def test_mcnemar_exact():
    assert mcnemar_p(20, 12, 2, 16) == pytest.approx(0.0129, abs=5e-5)   # Armitage and Berry (1994, p. 127)
    for f, g in [(12, 2), (5, 5), (0, 3), (7, 1), (30, 18), (1, 0)]:
        assert mcnemar_p(9, f, g, 9) == pytest.approx(binomtest(f, f + g, 0.5).pvalue, abs=1e-12)
    assert mcnemar_p(5, 0, 0, 3) == 1.0

def test_mde_connor():
    # Connor (1987, p. 209): psi = 0.5, d = 0.4 needs 23 pairs (80% power, two-sided 0.05); 22 do not suffice
    assert mde(23, 0.5) <= 0.4 < mde(22, 0.5)
    za, zb = 1.959963984540054, 0.8416212335729143
    for n, psi in [(96, 0.25), (24, 0.125), (400, 0.05), (8, 1.0)]:   # it is the root of Connor's sample-size equation
        d = mde(n, psi)
        assert (za * math.sqrt(psi) + zb * math.sqrt(psi - d * d)) ** 2 / d ** 2 == pytest.approx(n, rel=1e-9)
    assert mde(96, 0.3) < mde(48, 0.3) and mde(96, 0.1) < mde(96, 0.3)   # more pairs, or less discordance: smaller
    assert mde(96, 0.0) is None and mde(3, 0.5) is None

def test_paired_fields():
    a = [1] * 20 + [1] * 12 + [0] * 2 + [0] * 16
    b = [1] * 20 + [0] * 12 + [1] * 2 + [0] * 16
    r = paired(a, b).to_dict()
    assert (r['n'], r['a_only'], r['b_only'], r['both'], r['neither']) == (50, 12, 2, 20, 16)
    assert (r['a_rate'], r['b_rate'], r['diff']) == pytest.approx((0.64, 0.44, 0.2))
    assert r['ci'] == pytest.approx([0.0562, 0.3292], abs=5e-5) and r['p'] == pytest.approx(0.0129, abs=5e-5)
    assert r['mde'] == pytest.approx(mde(50, 14 / 50))
    json.dumps(r)   # a plain dict for summary.json
    assert paired(b, a).to_dict()['diff'] == pytest.approx(-0.2)

def test_paired_is_narrower_than_unpaired_when_methods_agree():
    from statsmodels.stats.proportion import confint_proportions_2indep
    r = paired([1] * 52 + [0] * 44, [1] * 40 + [0] * 12 + [1] * 4 + [0] * 40)
    lo, hi = confint_proportions_2indep(52, 96, 44, 96, method='newcomb')
    assert r.ci[1] - r.ci[0] < 0.6 * (hi - lo)

@pytest.mark.parametrize('a,b,msg', [([1, 0], [1], 'equal lengths'), ([1, 2], [1, 0], 'got 2 at position 1'),
                                     (['1', 0], [1, 0], "got '1' at position 0"), ([0.5], [1], 'outcomes must be 0/1'),
                                     ([None], [1], 'got None'), ([], [], 'at least one pair')])
def test_paired_refuses(a, b, msg):
    with pytest.raises(ValueError, match=msg): paired(a, b)

def _run(d:Path, outcomes:str, fams=('math', 'code'), **change) -> Path:
    "A run folder whose episodes alternate between `fams`, task ids as a seeded stream numbers them."
    recs = [dict(episode=i, family_spec=fams[i % 2], family=fams[i % 2], split='test',
                 task_id=f'{fams[i % 2]}-{i // 2}', status='success' if o == 'S' else 'failure')
            for i, o in enumerate(outcomes)]
    for i, kv in change.items(): recs[int(i[1:])] |= kv
    d.mkdir(parents=True)
    (d/'episodes.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs[::-1]))   # not in episode order
    return d

def test_align_and_rows(tmp_path):
    runs = {'base': _run(tmp_path/'base', 'FFSFFFSF'), 'cove': _run(tmp_path/'cove', 'SFSFSFSF'),
            'harness_only': _run(tmp_path/'h', 'SSSSFFFF')}
    assert [r['episode'] for r in episode_records(runs['base'])] == list(range(8))
    rows = paired_rows(runs, families=['math', 'code'], pairs=[('cove', 'base'), ('cove', 'harness_only')])
    got = {(r['method'], r['reference'], r['family']): r for r in rows}
    assert list(got) == [('cove', 'base', f) for f in ('math', 'code', 'overall')] + \
                        [('cove', 'harness_only', f) for f in ('math', 'code', 'overall')]
    o = got['cove', 'base', 'overall']
    assert (o['n'], o['a_only'], o['b_only'], o['both'], o['neither']) == (8, 2, 0, 2, 4)
    assert (o['ci_lo'], o['ci_hi']) == pytest.approx(newcombe_paired(2, 2, 0, 4))
    assert got['cove', 'base', 'code']['mde'] is None   # no discordant pair in code
    h = got['cove', 'harness_only', 'code']   # code: harness S S F F, cove F F F F
    assert (h['a_only'], h['b_only'], h['diff']) == (0, 2, -0.5)
    assert [r['reference'] for r in paired_rows(runs)] == ['base'] * 6   # default: each method against base

def test_align_refuses_different_streams(tmp_path):
    base = episode_records(_run(tmp_path/'base', 'SFSF'))
    with pytest.raises(ValueError, match=r"record 2 \(episode 2\) has task_id 'math-1' in base, 'math-7' in cove"):
        align(base, episode_records(_run(tmp_path/'c1', 'SFSF', e2={'task_id': 'math-7'})), ('base', 'cove'))
    with pytest.raises(ValueError, match="has family_spec 'math' in base, 'code' in cove"):
        align(base, episode_records(_run(tmp_path/'c2', 'SFSF', fams=('code', 'math'))), ('base', 'cove'))
    with pytest.raises(ValueError, match='base played 4 episodes, cove 3: episode 3 of base has no pair'):
        align(base, episode_records(_run(tmp_path/'c3', 'SFS')), ('base', 'cove'))
    with pytest.raises(ValueError, match='no episode records'): episode_records(tmp_path/'nosuch')
    with pytest.raises(ValueError, match=r"no run of \['base'\]"): paired_rows({'cove': tmp_path/'c3'})

def _py(code:str, *args) -> str:
    "stdout of `code` run in a fresh interpreter with `args`."
    r = subprocess.run([sys.executable, '-c', code, *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip()

CLI = ("import sys, contextlib, io\nfrom cove.cli import main\nsys.argv = ['cove'] + sys.argv[1:]\n"
       "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit): main()\n"
       "print('torch' in sys.modules)")

def test_imports_stay_light(tmp_path):
    # importing cove.stats (or cove.core) loads neither statsmodels nor torch; `cove --help`, `cove check` load no torch
    out = _py("import sys, cove.stats, cove.core; print('statsmodels' in sys.modules, 'torch' in sys.modules)")
    assert out == 'False False'
    assert _py(CLI, '--help') == 'False'
    assert _py(CLI, 'check', str(_run(tmp_path/'run', 'SF').parent)) == 'False'
