"Run one experiment notebook under papermill on the tiny random model (the wiring tests of `nbs/experiments/`)."
import csv, json, os
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

def run_experiment(tmp_path, name:str, **params):
    "Execute `nbs/experiments/{name}.ipynb` into `tmp_path`; `(out_dir, metrics.json, table.csv rows)`."
    pm = pytest.importorskip('papermill')
    out = tmp_path/'run'
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    pm.execute_notebook(str(ROOT/f'nbs/experiments/{name}.ipynb'), str(tmp_path/'executed.ipynb'), cwd=str(ROOT), progress_bar=False,
                        parameters=dict(model='tiny', out_dir=str(out), **params))
    return out, json.loads((out/'metrics.json').read_text()), list(csv.DictReader((out/'table.csv').open()))
