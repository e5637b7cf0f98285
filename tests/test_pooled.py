"""tools/pooled.py: the pooled figures the Claims page cites beyond paired.csv, written by the grid's aggregation."""
import json, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import pooled, sweep

def _ok(d:Path):
    d.mkdir(parents=True, exist_ok=True)
    (d/'cell.json').write_text(json.dumps({'status': 'ok'}))

def _curve(root:Path) -> dict:
    "Two learning_curve seeds: step 0 and step 8 on the same tasks (seed 0: 4 tasks, seed 1: 3)."
    outcomes = {0: {0: [1, 0, 0, 1], 8: [1, 1, 0, 1]}, 1: {0: [0, 0, 1], 8: [1, 0, 0]}}
    for s, steps in outcomes.items():
        d = root/'learning_curve'/f'seed{s}'
        _ok(d)
        rows = [dict(setting=None if st == 0 else 'lr=0.001', step=st, task_ids=[f't{i}' for i in range(len(x))],
                     success=x) for st, x in steps.items()]
        (d/'outcomes.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    return outcomes

def test_learning_curve_pooled_by_hand(tmp_path):
    "Checkpoint rates summed over seeds (4/7 at step 8) and step 8 vs step 0 as `cove.stats.pooled_paired` gives it."
    from cove.stats import pooled_paired, wilson
    o = _curve(tmp_path)
    lines = pooled.POOLED['learning_curve'](pooled.ok_seeds(tmp_path/'learning_curve'))
    lo, hi = wilson(4, 7)
    row8 = next(l for l in lines if l.startswith('| lr=0.001 | 8 |'))
    assert f'4/7 = 0.571 [{lo:.3f}, {hi:.3f}]' in row8
    p = pooled_paired({s: (st[8], st[0]) for s, st in o.items()})['pooled']
    assert (p.n, p.a_only, p.b_only) == (7, 2, 1)   # seed 0: t1 gained; seed 1: t0 gained, t2 lost
    assert f'{p.diff:+.3f} [{p.ci[0]:+.3f}, {p.ci[1]:+.3f}] | {p.p:.3g} (2/1) |' in row8
    assert next(l for l in lines if l.startswith('| base | 0 |')).count('—') == 4

def test_api_renaming_unpaired_rates(tmp_path):
    "Counts behind the rates summed over seeds, and a split-against-split comparison through `cove.stats.unpaired`."
    from cove.stats import unpaired
    import pandas as pd
    for s, (k_same, k_ren) in {0: (3, 1), 1: (2, 2)}.items():
        d = tmp_path/'api_renaming'/f'seed{s}'
        _ok(d)
        pd.DataFrame([dict(arm='standard', split='same', n=4, success=k_same / 4, n_api=4, api_correct=1.0),
                      dict(arm='standard', split='renamed', n=4, success=k_ren / 4, n_api=4, api_correct=0.5),
                      dict(arm='anti-recitation', split='same', n=4, success=0.5, n_api=4, api_correct=1.0),
                      dict(arm='anti-recitation', split='renamed', n=4, success=0.5, n_api=4, api_correct=0.75),
                      ]).to_csv(d/'table.csv', index=False)
    md = '\n'.join(pooled.POOLED['api_renaming'](pooled.ok_seeds(tmp_path/'api_renaming')))
    assert '| standard | same | 5/8 = 0.625 [' in md and '| standard | renamed | 3/8 = 0.375 [' in md
    u = unpaired(3, 8, 5, 8)
    assert f'| success, standard: renamed - same | 0.375 - 0.625 = {u.diff:+.3f} [{u.ci[0]:+.3f}, {u.ci[1]:+.3f}]' in md
    assert f'| API correct, renamed: anti-recitation - standard | 0.750 - 0.500 = +0.250' in md

def test_router_pareto_shares_and_cost(tmp_path):
    "Routed and parametric episodes summed over seeds: the share, Token/Inst. = 14100 x share, Rel. to always_both."
    import pandas as pd
    for s, (cove_param, k) in {0: (2, 3), 1: (4, 1)}.items():
        d = tmp_path/'router_pareto'/f'seed{s}'
        _ok(d)
        pd.DataFrame([dict(method='always_both', status='ok', success=0.5, n=8, routed=8, n_param=8, train_tokens=100,
                           updates=2),
                      dict(method='cove', status='ok', success=k / 8, n=8, routed=8, n_param=cove_param, train_tokens=10,
                           updates=1)]).to_csv(d/'table.csv', index=False)
        pd.DataFrame([dict(method='cove', family='math', routed=8, harness_only=1 - cove_param / 8,
                           parametric_candidate=cove_param / 8, hybrid=0.0)]).to_csv(d/'router_shares.csv', index=False)
    md = '\n'.join(pooled.POOLED['router_pareto'](pooled.ok_seeds(tmp_path/'router_pareto')))
    assert '| cove | 4/16 = 0.250 [' in md and '| 6/16 = 0.375 [' in md   # success 3 + 1, parametric 2 + 4 of 16
    assert f'| {14100 * 6 / 16:.0f} | 0.38 | 20 | 2 |' in md
    assert '| cove | math | 10/16 = 0.625 [' in md   # harness_only 6 + 4

def test_the_grid_writes_pooled_md_and_says_why_not(tmp_path):
    "aggregate_all writes `<nb>/aggregate/pooled.md` and the index shows it; a seed missing its file is one reason."
    _curve(tmp_path)
    recs = [dict(name='learning_curve', seed=s, dir=f'learning_curve/seed{s}', status='ok', params={'seed': s},
                 seconds=1.0, artifacts=dict(tables=[], figures=[], metrics=[]), n={}, executed='x.ipynb')
            for s in (0, 1)]
    aggs = sweep.aggregate_all(tmp_path, recs)
    assert aggs['learning_curve']['pooled'] == dict(md='pooled.md', seeds=[0, 1])
    assert (tmp_path/'learning_curve'/'aggregate'/'pooled.md').read_text().startswith('Pooled over seeds 0, 1')
    sweep.write(tmp_path, recs, 'r', 'cmd', dict(engine='local', seeds=[0, 1], unseeded=[], cells=2), aggs)
    assert '(learning_curve/aggregate/pooled.md)' in (tmp_path/'index.md').read_text()
    (tmp_path/'learning_curve'/'seed1'/'outcomes.jsonl').unlink()
    reason = sweep.aggregate_all(tmp_path, recs)['learning_curve']['pooled']['reason']
    assert reason.startswith('FileNotFoundError') and 'outcomes.jsonl' in reason

def test_the_command_line(tmp_path, capsys):
    "Run on an existing grid: one line per notebook; a notebook it does not know is refused in one line."
    _curve(tmp_path)
    assert pooled.main([str(tmp_path), '--only', 'learning_curve']) == 0
    assert 'learning_curve/aggregate/pooled.md (seeds [0, 1])' in capsys.readouterr().out
    with pytest.raises(SystemExit, match='--only table9: no pooled figures for it'):
        pooled.main([str(tmp_path), '--only', 'table9'])
    with pytest.raises(SystemExit, match='not a folder'):
        pooled.main([str(tmp_path/'nowhere')])
