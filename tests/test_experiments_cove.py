"""COVE §3.3 / Figure 4 (`trigger_timing`), Figures 2-3 (`harness_limits`) and Figure 7c (`attention_shift`) execute
under papermill with the tiny random model at the smallest budget (wiring)."""
import csv

from _papermill import run_experiment as _run, check_paired

def test_trigger_timing_runs_with_papermill(tmp_path):
    """Every episode of the tiny model fails, so the trigger's times follow from the thresholds alone: cold start at
    the family's 1st episode (k=1), plateau at the 2nd (w=1), the fixed interval at the 2nd. Only the cold start has
    data to train on (Algorithm 1: the gold references at a ColdStartFailure, else successful parametric-routed
    trajectories, of which a failing model has none), so the other events fire and their updates are skipped."""
    arms = 'cove,always_on,harness_only,no_cold_start'
    out, m, rows = _run(tmp_path, 'trigger_timing', episodes=2, arms=arms, variant='always_both', every=2,
                        overrides={'model.max_new_tokens': 8, 'trigger.k': 1, 'trigger.w': 1})
    assert [r['arm'] for r in rows] == arms.split(',') and all(r['status'] == 'ok' for r in rows)
    for col in ('success', 'success 95% CI', 'n', 'stage 1', 'stage 1 95% CI', 'stage 1 n', 'stage 2 n', 'updates',
                'update_episodes', 'fired_plateau', 'fired_cold_start_failure', 'train_tokens',
                'train_tokens_modelled'):
        assert col in rows[0], col
    assert all(r['n'] == '2' and r['success 95% CI'].startswith('[') and r['stage 1 n'] == '1' for r in rows)
    by = {r['arm']: r for r in rows}
    # 2 episodes: the plateau needs 2 since that update
    assert by['cove']['update_episodes'] == 'math#1(cold_start_failure)'
    # the condition removed: the plateau fires first, with nothing to train on
    assert (by['no_cold_start']['fired_plateau'], by['no_cold_start']['updates']) == ('1', '0')
    assert (by['always_on']['fired_fixed_interval'], by['always_on']['updates']) == ('1', '0')
    assert m['details']['no_cold_start']['updates_skipped'] == 1 and m['details']['always_on']['updates_skipped'] == 1
    assert (by['harness_only']['updates'] == '0' and by['harness_only']['train_tokens'] == '0'
            and int(by['cove']['train_tokens']) > 0)
    assert (m['arms']['no_cold_start']['keys'] == {'trigger.tau_c': 0.0} and len(m['stream']) == 2
            and set(m['claims']) == {'cove > always_on', 'cove > harness_only'})
    for f in ('table.md', 'success_over_episodes.png', 'stages.png'): assert (out/f).exists(), f
    others = [a for a in arms.split(',') if a != 'cove']   # no base arm: COVE against each other arm
    d = m['details']
    rates = {(a, 'math'): d[a]['per_family']['math']['success_rate']
             for a in d} | {(a, 'overall'): d[a]['overall']['success_rate'] for a in d}
    check_paired(out, m, [('cove', a) for a in others], ['math'], rates)
    assert all('McNemar p' in v
               and v.split(':')[0] in ('does not hold', 'holds',
                                       'holds in the point estimate only (the paired interval includes 0)') for v in m['claims'].values())

def test_harness_limits_runs_with_papermill(tmp_path):
    """Harness-only on MBPP for k = 2 and 4 on the same tasks; formal is reported unavailable exactly when no Lean
    toolchain exists."""
    from cove.tasks.formal import find_lean
    out, m, rows = _run(tmp_path, 'harness_limits', datasets='code:mbpp', ks='2,4', episodes=2,
                        overrides={'model.max_new_tokens': 8})
    played = [r for r in rows if r['dataset'] == 'code:mbpp']
    assert ([r['k'] for r in played] == ['2', '4']
            and all(r['status'] == 'ok' and r['n'] == '2' and r['success 95% CI'].startswith('[') for r in played))
    for col in ('stage 1', 'stage 1 95% CI', 'stage 1 n', 'kb_entries', 'retrieved_per_episode', 'syntax', 'runtime',
                'wrong_answer', 'timeout', 'no_code'):
        assert col in played[0], col
    assert all(sum(int(r[c]) for c in ('syntax', 'runtime', 'wrong_answer', 'timeout', 'no_code'))
               + round(float(r['success']) * 2) == 2 for r in played)
    formal = [r for r in rows if r['dataset'] == 'formal']
    if find_lean() is None:
        assert (len(formal) == 1 and formal[0]['status'] == 'unavailable' and 'Lean' in formal[0]['reason']
                and not m['lean']['available'])
    errors = list(csv.DictReader((out/'errors.csv').open()))
    assert errors and all(e['n'] == '1' and e['share 95% CI'].startswith('[') for e in errors)
    assert 'Lean toolchain' in (out/'table.md').read_text()
    for f in ('harness_evolution.png', 'error_categories.png', 'episodes_by_category.csv'): assert (out/f).exists(), f

def test_attention_shift_runs_with_papermill(tmp_path):
    """Both adapters trained one step; the four regions found in every input; differences with t intervals and shares
    with Wilson intervals."""
    out, m, rows = _run(tmp_path, 'attention_shift', n_train=2, max_steps=1, n_inputs=3, k=2)
    assert [r['region'] for r in rows] == ['marker', 'instruction', 'current_api', 'default_api']
    for col in ('n', 'base', 'standard', 'anti_recitation', 'standard 95% CI', 'anti_recitation 95% CI', 'diff',
                'diff 95% CI', 'positive_share', 'positive_share 95% CI'):
        assert col in rows[0], col
    assert all(r['n'] == '3' and r['diff 95% CI'].startswith('[') for r in rows)
    # every input has its instruction and current names
    assert all(p['instruction'] > 0 and p['current_api'] > 0 for p in m['region_tokens'])
    for r in rows: assert abs(float(r['diff']) - (float(r['anti_recitation']) - float(r['standard']))) < 2e-4
    assert all(0 <= float(r[a]) <= 1 for r in rows for a in ('base', 'standard', 'anti_recitation'))
    assert ((out/'adapters'/'standard'/'adapter_config.json').exists()
            and (out/'adapters'/'anti_recitation'/'adapter_config.json').exists())
    for f in ('table.md', 'attention_shift.png'): assert (out/f).exists(), f
