"""`tools/report.py --scale cpu` (`make experiments-cpu`, issue 56): every notebook's CPU-scale preset names only
parameters its parameters cell declares, with values its own check accepts; the command line wins over a preset."""
import json, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import experiment_runs as runs
import report

def _code_cells(path:Path) -> list[tuple[list, str]]:
    "The code cells of notebook `path`: (tags, source)."
    nb = json.loads(path.read_text())
    return [(c.get('metadata', {}).get('tags', []), ''.join(c['source']))
            for c in nb['cells'] if c['cell_type'] == 'code']

def test_every_notebook_has_a_cpu_preset_of_declared_parameters():
    "A preset per notebook; each key a parameter papermill finds in that notebook, each value of its declared type."
    have = {p.stem: p for p in runs.notebooks()}
    assert set(runs.SCALES['cpu']) == set(have), set(runs.SCALES['cpu']) ^ set(have)
    for nb, preset in runs.SCALES['cpu'].items():
        params = {x.name: x for x in runs.inspect_params(have[nb])[0]}
        assert preset and set(preset) <= set(params), (nb, set(preset) - set(params))
        assert not {'seed', 'model', 'out_dir', 'profile'} & set(preset), nb   # the grid's and the user's
        for k, v in preset.items():
            assert type(v).__name__ == params[k].inferred_type_name, (nb, k, v, params[k].inferred_type_name)

def test_cpu_presets_pass_each_notebooks_own_check():
    """Each notebook's parameters cell, then the preset, then the notebook's `check_params` cell: no ParamError (the
    budget keys are config keys, the names known variants, the numbers in range)."""
    for p in runs.notebooks():
        cells = _code_cells(p)
        i = next(i for i, (tags, _) in enumerate(cells) if 'parameters' in tags)
        check = next(src for _, src in cells[i + 1:] if 'check_params(' in src)
        ns = {}
        exec(cells[i][1], ns)
        ns.update(runs.SCALES['cpu'][p.stem])
        exec(check, ns)   # raises cove.params.ParamError in one line on a bad value
        assert set(runs.SCALES['cpu'][p.stem]) <= set(ns['checked']), p.stem   # each preset key was checked

def test_command_line_wins_over_the_preset():
    "`-p NAME` (every notebook) and `-p NB.NAME` (one) replace a preset's key; the rest of the preset stays."
    names = {p.stem for p in runs.notebooks()}
    glob, per = report.split_params([('episodes', '3'), ('api_renaming.n_eval', '5')], None, 'tiny', names)
    per = runs.scaled_params('cpu', names, glob, per)
    assert 'table2_main' not in per and 'episodes' not in per['memrl_epochs']   # its preset was episodes alone
    assert per['memrl_epochs'] == {'epochs': 3, 'transfer_episodes': 22, 'variants': 'base,evo_memory,memrl'}
    assert per['api_renaming'] == {'n_train': 32, 'max_steps': 16, 'n_eval': 5}
    assert per['calibration'] == runs.SCALES['cpu']['calibration'] and glob['episodes'] == 3
    assert runs.scaled_params(None, names, glob, {'x': {}}) == {'x': {}}
    with pytest.raises(SystemExit, match=r"^--scale 'gpu': one of cpu$"): runs.scaled_params('gpu', names, {}, {})

def test_bad_scale_or_resume_are_one_line(tmp_path):
    "An unknown --scale, --resume without --run-id: one line, exit 2, nothing written."
    for args, says in ((['--scale', 'huge'], '--scale'), (['--resume', '--seeds', '0'], '--resume needs --run-id')):
        r = subprocess.run([sys.executable, str(ROOT/'tools'/'report.py'), '--out', str(tmp_path/'o'), *args],
                           capture_output=True, text=True, timeout=120)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and says in lines[0], r.stderr[-500:]
    assert not (tmp_path/'o').exists()

def test_make_experiments_cpu():
    "`make experiments-cpu` is the resumable 3-seed grid at --scale cpu in a fixed folder; ONLY= passes --only."
    def dry(*a): return subprocess.run(['make', '-n', 'experiments-cpu', *a], cwd=ROOT, capture_output=True, text=True)
    r = dry('ONLY=table2_main,memrl_epochs')
    assert r.returncode == 0 and ('tools/report.py --scale cpu --seeds 0,1,2 --run-id cpu --resume '
                                  '--only table2_main,memrl_epochs') in r.stdout, r.stdout + r.stderr
    assert '--only' not in dry().stdout
