"""Experiment notebooks (`nbs/experiments/`) execute under papermill with their parameters cell overridden (tiny model,
smoke sizes)."""
import json, os, shutil
from pathlib import Path
import pytest
from _papermill import check_paired, check_shown

ROOT = Path(__file__).resolve().parents[1]

def test_api_renaming_runs_with_papermill(tmp_path):
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/'nbs/experiments/api_renaming.ipynb'), str(tmp_path/'executed.ipynb'), cwd=str(ROOT),
                        progress_bar=False,
                        parameters=dict(model='tiny', n_train=3, n_eval=2, max_steps=1, out_dir=str(out)))
    check_shown(tmp_path/'executed.ipynb', out)
    m = json.loads((out/'metrics.json').read_text())
    arms = {(r['arm'], r['split']): r for r in m['table']}
    assert set(arms) == {(a, s) for a in ('base', 'base + memory', 'standard', 'anti-recitation')
                         for s in ('same', 'renamed')}
    assert all(r['n'] == 2 for r in arms.values())
    for name in ('standard', 'anti_recitation'):
        u = m['updates'][name]
        assert u['train_tokens'] > 0 and u['examples'] == 3 and (out/'adapters'/name/'adapter_config.json').exists()
    assert m['renamed'] == 3                       # every anti-recitation training episode had its own renaming
    assert m['kb']['label']['volatile'] > 0 and m['kb']['label']['stable'] > 0
    assert sum(sum(v for k, v in r.items() if k not in ('arm', 'split')) for r in m['failures']) == 16
    for f in ('table.csv', 'table.md', 'failures.csv', 'success_api.png', 'failures.png', 'episodes.jsonl'):
        assert (out/f).exists(), f
    recs = [json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines()]
    rates = {(a, g): sum(r['status'] == 'success' for r in rs) / len(rs)
             for a in ('base', 'base + memory', 'standard',
                       'anti-recitation') for g in ('same', 'renamed',
                                                    'overall') for rs in [[r for r in recs if r['arm'] == a
                                                                           and g in (r['split'], 'overall')]]}
    pairs = [(a, 'base') for a in ('base + memory', 'standard',
                                   'anti-recitation')] + [('anti-recitation', a) for a in ('base + memory', 'standard')]
    rows = check_paired(out, m, pairs, ['same', 'renamed'], rates)
    assert all(r['n'] == ('4' if r['family'] == 'overall' else '2') for r in rows)

def test_calibration_runs_with_papermill(tmp_path):
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/'nbs/experiments/calibration.ipynb'), str(tmp_path/'executed.ipynb'), cwd=str(ROOT),
                        progress_bar=False,
                        # its grid at n=2, shots 0 and 2 (wiring)
                        parameters=dict(out_dir=str(out), model='tiny', overrides={'model.max_new_tokens': 8}))
    check_shown(tmp_path/'executed.ipynb', out)
    m = json.loads((out/'metrics.json').read_text())
    cells = {(r['family'], r['shots']) for r in m['grid']}
    assert cells == {(f, s) for f in ('tableqa', 'multihop', 'math', 'code') for s in (0, 2)}
    assert all(r['n'] == 2 and 0 <= r['ci_lo'] <= r['success'] <= r['ci_hi'] <= 1 for r in m['grid'])
    recs = [json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines()]
    assert len(recs) == 16 and all(r['split'] == 'test' for r in recs)
    assert (all(r['n'] == 2 for r in m['grid'])
            and {r['difficulty'] for r in m['grid']
                 if r['family'] == 'tableqa'} == {m['defaults']['tableqa']['difficulty']})
    assert all('-train-' in e for r in recs for e in r['examples'])   # worked examples are train tasks
    assert any(r['examples'] for r in recs) and not any(r['examples'] for r in recs if r['shots'] == 0)
    for f in ('calibration.csv', 'table.md', 'calibration.png'): assert (out/f).exists(), f

def test_learning_curve_runs_with_papermill(tmp_path):
    "A 2-setting grid (lr x layers), one shared step 0, each checkpoint paired against it on the same tasks."
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/'nbs/experiments/learning_curve.ipynb'), str(tmp_path/'executed.ipynb'),
                        cwd=str(ROOT), progress_bar=False,
                        parameters=dict(model='tiny', steps='1,2', n_train=3, n_eval=2, lr='1e-3,5e-4', layers=0,
                                        out_dir=str(out), overrides={'model.max_new_tokens': 8}))
    check_shown(tmp_path/'executed.ipynb', out)
    m = json.loads((out/'metrics.json').read_text())
    curve = m['curve']
    assert [(r['setting'], r['step']) for r in curve] == [('base', 0), ('lr=0.001 layers=0', 1),
                                                          ('lr=0.001 layers=0', 2),
                                                         ('lr=0.0005 layers=0', 1), ('lr=0.0005 layers=0', 2)]
    assert all(r['n'] == 2 for r in curve) and m['settings'] == [dict(lr=1e-3, layers=0), dict(lr=5e-4, layers=0)]
    assert curve[0]['train_tokens'] == 0 < curve[1]['train_tokens'] < curve[2]['train_tokens']   # one run, in segments
    for r in curve[1:]:   # paired against step 0: the gain is the difference of the rates, inside its interval
        assert r['gain'] == pytest.approx(r['success'] - curve[0]['success'])
        assert r['gain_lo'] <= r['gain'] <= r['gain_hi'] and 0 <= r['p'] <= 1
    lines = [json.loads(l) for l in (out/'outcomes.jsonl').read_text().splitlines()]
    assert len(lines) == 5 and len({tuple(l['task_ids']) for l in lines}) == 1   # the same tasks at every point
    assert m['best']['setting'] in {'lr=0.001 layers=0', 'lr=0.0005 layers=0'}
    assert (out/'adapters'/'setting1-step-002'/'adapter_config.json').exists() and (out/'curve.png').exists()

def test_learning_curve_grpo_runs_with_papermill(tmp_path):
    "algo='grpo': the same curve for LoRA GRPO on R_task, at train.grpo_lr, paired against step 0."
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/'nbs/experiments/learning_curve.ipynb'), str(tmp_path/'executed.ipynb'),
                        cwd=str(ROOT), progress_bar=False,
                        parameters=dict(model='tiny', algo='grpo', steps='1,2', n_train=2, n_eval=2, out_dir=str(out),
                                        overrides={'model.max_new_tokens': 8, 'train.grpo_generations': 2}))
    check_shown(tmp_path/'executed.ipynb', out)
    m = json.loads((out/'metrics.json').read_text())
    assert m['algo'] == 'grpo' and m['settings'][0]['lr'] == 2e-5 and m['n_train'] == 2   # train.grpo_lr; 2 prompts
    assert [r['step'] for r in m['curve']] == [0, 1, 2]
    assert 0 < m['curve'][1]['train_tokens'] < m['curve'][2]['train_tokens']   # one GRPO run, in segments
    assert all(r['gain'] == pytest.approx(r['success'] - m['curve'][0]['success']) for r in m['curve'][1:])
    assert (out/'adapters'/'setting0-step-002'/'adapter_config.json').exists()

@pytest.mark.slow
def test_learning_curve_smoke_defaults(tmp_path):
    """The notebook's own smoke defaults (SmolLM2, 2 steps) run end to end (`make test-slow`; `make experiments` runs
    them too)."""
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/'nbs/experiments/learning_curve.ipynb'), str(tmp_path/'executed.ipynb'), cwd=str(ROOT),
                        progress_bar=False, parameters=dict(out_dir=str(out)))
    check_shown(tmp_path/'executed.ipynb', out, tiny=False)
    m = json.loads((out/'metrics.json').read_text())
    assert [r['step'] for r in m['curve']] == [0, 2] and m['n_train'] == 4 and m['curve'][1]['train_tokens'] > 0
