"""The peers' headline experiments (`memrl_epochs`, `evolver_ablations`, `coevo_ablations`) execute under papermill with
the tiny random model at the smallest budget (wiring)."""
import csv, json
TINY = {'model.max_new_tokens': 8, 'model.batch_size': 4, 'memrl.summary_tokens': 8}

from _papermill import run_experiment as _run, check_paired

def _ci(s:str) -> bool:
    lo, hi = json.loads(s)
    return 0 <= lo <= hi <= 1

def test_memrl_epochs_runs_with_papermill(tmp_path):
    """Base, Evo-Memory, MemRL MC and TD over 2 epochs of one task; frozen transfer on a held-out task (an unknown
    variant: tests/test_params.py)."""
    names = 'base,evo_memory,memrl,memrl_td'
    out, m, rows = _run(tmp_path, 'memrl_epochs', families='math', episodes=1, epochs=2, transfer_episodes=1,
                        variants=names, budget={}, overrides=TINY)
    assert [r['variant'] for r in rows] == names.split(',')
    for col in ('SR', 'SR 95% CI', 'SR n', 'CSR', 'CSR 95% CI', 'CSR n', 'FR', 'FR 95% CI', 'FR n', 'FR mean', 'epochs',
                'status', 'reason'):
        assert col in rows[0], col
    ok = [r for r in rows if r['status'] == 'ok']
    assert (m['failed'] == {} and len(ok) == 4
            and all(r['SR n'] == '1' and r['CSR n'] == '1' and r['epochs'] == '2' and _ci(r['SR 95% CI'])
                    and _ci(r['CSR 95% CI']) for r in ok))
    # the tiny model fails everything: no success to lose
    assert all(int(r['FR n']) == 0 or _ci(r['FR 95% CI']) for r in ok)
    assert len(m['stream']) == 1 and len(m['held_out']) == 1 and m['stream'] != m['held_out']
    assert ({r['variant'] for r in m['sr_per_epoch']} == {'base', 'evo_memory', 'memrl', 'memrl_td'}
            and len(m['sr_per_epoch']) == 8)
    tr = list(csv.DictReader((out/'transfer.csv').open()))
    assert ([r['variant'] for r in tr] == ['base', 'memrl (frozen)', 'memrl_td (frozen)']
            and all(r['status'] == 'ok' and r['success n'] == '1' and _ci(r['success 95% CI']) for r in tr))
    assert all(float(r['injected_per_episode']) >= 0 for r in tr[1:])
    md = (out/'table.md').read_text()
    assert 'Failed rows (0)' in md and '95% CI' in md and 'Transfer' in md
    for f in ('table.md', 'transfer.csv', 'sr_per_epoch.csv', 'sr_csr_fr.png', 'sr_over_epochs.png', 'transfer.png'):
        assert (out/f).exists(), f
    # each variant against base, then memrl (the paper's method) against each other
    ok_names = [r['variant'] for r in ok]
    pairs = [(v, 'base') for v in ok_names if v != 'base'] + [('memrl', v) for v in ok_names
                                                              if v not in ('base', 'memrl')]
    for measure, col in (('SR', 'SR'), ('CSR', 'CSR')):
        # one family: its rate is the overall one
        rates = {(r['variant'], g): float(r[col]) for r in ok for g in ('math', 'overall')}
        check_paired(out, m, pairs, ['math'], rates, measure)
    tr_pairs = [('memrl (frozen)', 'base'), ('memrl_td (frozen)', 'base'), ('memrl (frozen)', 'memrl_td (frozen)')]
    check_paired(out, m, tr_pairs, ['math'],
                 {(r['variant'], g): float(r['success']) for r in tr for g in ('math', 'overall')}, 'transfer')

def test_evolver_ablations_runs_with_papermill(tmp_path):
    """The full system and its four ablations on a one-episode stream (an offline phase after it), with EM per family, n
    and intervals."""
    names = 'evolver,no_rl,no_exp_retrieve,no_pruning,no_distillation'
    budget = {'evolver.max_turns': 1, 'evolver.train_every': 0, 'evolver.prune_every': 1, 'evolver.cold_start': False}
    out, m, rows = _run(tmp_path, 'evolver_ablations', families='math', episodes=1, variants=names, budget=budget,
                        overrides=TINY)
    assert [r['variant'] for r in rows] == names.split(',')
    for col in ('math EM', 'math EM 95% CI', 'math EM n', 'EM', 'EM 95% CI', 'EM n', 'principles', 'pruned',
                'distilled', 'status', 'reason'):
        assert col in rows[0], col
    assert all(r['status'] == 'ok' and r['EM n'] == '1' and r['math EM n'] == '1' and _ci(r['EM 95% CI'])
               for r in rows), [(r['variant'], r['reason']) for r in rows]
    by = {r['variant']: r for r in rows}
    # the switch did switch something off
    assert int(by['no_distillation']['distilled']) == 0 and int(by['no_distillation']['principles']) == 0
    assert int(by['evolver']['offline_phases']) == 1 and int(by['no_distillation']['offline_phases']) == 0
    assert m['details']['no_exp_retrieve']['exp_retrieve'] is False and len(m['stream']) == 1
    md = (out/'table.md').read_text()
    assert 'Failed rows (0)' in md and '95% CI' in md
    for f in ('table.md', 'ablations.png', 'success_over_episodes.png'): assert (out/f).exists(), f
    rates = {(r['variant'], g): float(r['math EM' if g == 'math' else 'EM']) for r in rows for g in ('math', 'overall')}
    # the full system is the reference
    check_paired(out, m, [(v, 'evolver') for v in names.split(',')[1:]], ['math'], rates)

def test_coevo_ablations_runs_with_papermill(tmp_path):
    """Train, validation-only checkpoint selection and frozen test for the full system and its ablations; the missing
    switch is a failed row."""
    names = 'coevo,fixed_router,no_temporal_expansion,no_path_credit,no_memory_evolution'
    out, m, rows = _run(tmp_path, 'coevo_ablations', families='math', episodes=2, val_episodes=1, test_episodes=1,
                        variants=names, budget={'coevo.phase_len': 1, 'coevo.k': 2}, overrides=TINY)
    assert [r['variant'] for r in rows] == names.split(',') + ['coevo (final state)']
    for col in ('train', 'train 95% CI', 'train n', 'checkpoints', 'selected', 'val', 'val 95% CI', 'val n', 'math',
                'math 95% CI', 'math n', 'test', 'test 95% CI', 'test n', 'status', 'reason'):
        assert col in rows[0], col
    ok, bad = [r for r in rows if r['status'] == 'ok'], [r for r in rows if r['status'] != 'ok']
    assert [r['variant'] for r in bad] == ['no_temporal_expansion'] and 'no coevo.* key' in bad[0]['reason']
    assert (len(ok) == 5
            and all(r['test n'] == '1' and r['train n'] == '2' and r['val n'] == '1' and _ci(r['test 95% CI'])
                    and _ci(r['val 95% CI']) for r in ok))
    # phase_000 and the final state
    assert all(int(r['checkpoints']) == 2 and r['selected'] in ('phase_000', 'final') for r in ok)
    assert (ok[-1]['selected'] == 'final'
            and set(m['selection']) == {'coevo', 'fixed_router', 'no_path_credit', 'no_memory_evolution'})
    md = (out/'table.md').read_text()
    assert 'Failed rows (1)' in md and '95% CI' in md
    for f in ('table.md', 'ablations.png'): assert (out/f).exists(), f
    rates = {(r['variant'], g): float(r['math' if g == 'math' else 'test']) for r in ok for g in ('math', 'overall')}
    pairs = [(r['variant'], 'coevo') for r in ok[1:]]   # against the full system, its final state among them
    check_paired(out, m, pairs, ['math'], rates)
