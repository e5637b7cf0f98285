"""COVE Table 2 (`table2_main`) and Table 3 / Figure 6 (`router_pareto`) execute under papermill with the tiny random
model at the smallest budget (wiring)."""
TINY = {'model.max_new_tokens': 8, 'self_challenging.max_new_tokens': 48, 'evolver.max_turns': 1,
        'evolver.train_every': 0, 'trigger.k': 1}

from _papermill import run_experiment, check_paired

def _run(tmp_path, name, **params): return run_experiment(tmp_path, name, episodes=1, overrides=TINY, **params)

def test_table2_main_runs_with_papermill(tmp_path):
    """All nine methods on one 2-episode stream (an unknown method is refused before anything loads:
    tests/test_params.py)."""
    meths = 'base,harness_only,parametric_only,cove,memrl,coevo,evolver,evo_memory,self_challenging'
    out, m, rows = _run(tmp_path, 'table2_main', methods=meths)
    assert [r['method'] for r in rows] == meths.split(',')                         # every method kept, in order
    for col in ('math 95% CI', 'math n', 'tableqa 95% CI', 'tableqa n', 'overall 95% CI', 'overall n', 'hybrid',
                'hybrid 95% CI', 'hybrid n', 'train_tokens', 'train_tokens_modelled', 'status', 'reason'):
        assert col in rows[0], col
    ok = [r for r in rows if r['status'] == 'ok']
    assert (m['failed'] == {} and len(ok) == 9
            and all(r['overall n'] == '2' and r['math n'] == '1' and r['tableqa n'] == '1'
                    and r['overall 95% CI'].startswith('[') for r in ok))
    # every method on exactly COVE's hybrid episodes
    assert all(int(r['hybrid n']) == len(m['hybrid_episodes']) for r in ok)
    assert len(m['stream']) == 2 and int(next(r for r in ok if r['method'] == 'parametric_only')['train_tokens']) > 0
    md = (out/'table.md').read_text()
    assert 'Failed methods (0)' in md and '95% CI' in md
    for f in ('table.md', 'table2.png', 'success_over_episodes.png'): assert (out/f).exists(), f
    names = [r['method'] for r in ok]   # each method against base, then cove against each other method
    pairs = [(x, 'base') for x in names if x != 'base'] + [('cove', x) for x in names if x not in ('base', 'cove')]
    rates = {(x, f): m['details'][x]['per_family'][f]['success_rate'] for x in names for f in ('math', 'tableqa')}
    rates |= {(x, 'overall'): m['details'][x]['overall']['success_rate'] for x in names}
    rows = check_paired(out, m, pairs, ['math', 'tableqa'], rates)
    assert all(r['n'] == ('2' if r['family'] == 'overall' else '1') for r in rows) and len(rows) == 45

def test_router_pareto_runs_with_papermill(tmp_path):
    """Always-Both, Random-Route and COVE: Appendix-A Token/Inst., Rel. (Always-Both = 1), Eff., shares, Pareto plot,
    the observation."""
    out, m, rows = _run(tmp_path, 'router_pareto')
    assert ([r['method'] for r in rows] == ['always_both', 'random_route', 'cove']
            and all(r['status'] == 'ok' for r in rows))
    for col in ('success', 'success 95% CI', 'n', 'token_per_inst', 'rel', 'eff', 'train_tokens',
                'train_tokens_modelled'):
        assert col in rows[0], col
    ab = rows[0]
    # Always-Both: every routed episode parametric
    assert ab['n'] == '2' and float(ab['token_per_inst']) == 14100 and float(ab['rel']) == 1.0
    assert all(r['routed'] == '2' and r['success 95% CI'].startswith('[') for r in rows)
    assert all(r['matches_router_shares'] for r in m['routes'])
    # no base arm: always_both
    pairs = [('random_route', 'always_both'), ('cove', 'always_both'), ('cove', 'random_route')]
    rows = check_paired(out, m, pairs, ['math', 'tableqa'],
                        {(r['method'], 'overall'): float(r['success']) for r in m['table']})
    assert all(r['n'] == ('2' if r['family'] == 'overall' else '1') for r in rows)
    assert 'Always-Both (`always_both`, the Rel. reference; there is no Base arm)' in (out/'table.md').read_text()
    assert (set(m['observation']) >= {'a', 'b'}
            and all(m['observation'][k].split(':')[0] in ('holds', 'does not hold') for k in ('a', 'b')))
    for f in ('table.md', 'router_shares.csv', 'pareto.png', 'router_shares.png'): assert (out/f).exists(), f
