"""Issue 56 item 1: `cove demo --seeds K` plays K seeded streams at once, keeps each seed's tables, and pools the
paired comparisons over the seeds (the tiny random Llama: a check of the wiring, not of any method)."""
import json
import pytest
from cove.core import read_jsonl
from cove.demo import run_demo, demo_config
from cove.stats import pooled_paired, episode_records, align

SETS = {'model.name': 'tiny', 'model.dtype': 'float32', 'trigger.k': 2, 'model.batch_size': 16,
        'model.max_new_tokens': 12, 'release.heldout': 1, 'run.drift': ''}
METHODS, FAMILIES = ['base', 'cove'], ['math', 'tableqa']

@pytest.fixture(scope='module')
def seeded(tmp_path_factory):
    d = tmp_path_factory.mktemp('seeds')/'demo'
    cfg = demo_config(sets=SETS, env={}, episodes=2)
    return d, run_demo(cfg, d, episodes=2, methods=METHODS, families=FAMILIES, progress=False, engine='hf', seeds=2)

def test_each_seed_its_own_stream_and_tables(seeded):
    d, s = seeded
    assert s['seeds'] == [0, 1] and sorted(s['per_seed']) == [0, 1]
    for k in (0, 1):
        assert (d/f'seed{k}'/'table.md').exists() and (d/f'seed{k}'/'paired.csv').exists()
        saved = json.loads((d/f'seed{k}'/'cove'/'config.json').read_text())
        assert saved['config']['run.seed'] == k and saved['sources']['run.seed'] == 'cove demo --seeds'
    tasks = [[r['task_id'] for r in episode_records(d/f'seed{k}'/'base')] for k in (0, 1)]
    assert tasks[0] != tasks[1]   # another seed, another task stream

def test_pooled_rows_are_the_seeds_pairs_summed(seeded):
    d, s = seeded
    row = next(r for r in s['pooled'] if (r['method'], r['reference'], r['family']) == ('cove', 'base', 'overall'))
    by = {}
    for k in (0, 1):
        al = align(episode_records(d/f'seed{k}'/'cove'), episode_records(d/f'seed{k}'/'base'))
        by[k] = ([a['status'] == 'success' for a, _ in al], [b['status'] == 'success' for _, b in al])
    want = pooled_paired(by)['pooled']
    assert (row['n'], row['seeds'], row['a_only'], row['b_only'], row['p']) == (8, 2, want.a_only, want.b_only, want.p)
    text = (d/'table.md').read_text()
    assert 'Pooled over seeds 0, 1' in text and '[seed 1](seed1/table.md)' in text and 'IQM' in text
    assert (d/'pooled.csv').exists() and (d/'seeds.csv').exists()
    assert json.loads((d/'summary.json').read_text())['seeds'] == [0, 1]
