"Run every component notebook's tests (nbdev's `test_nb`), one pytest test per notebook, each in its own process."
import os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted((ROOT/'nbs').glob('[0-9]*.ipynb')) + sorted((ROOT/'nbs'/'tutorials').glob('*.ipynb'))   # and the tutorials
FLAGS = os.environ.get('COVE_NB_FLAGS', '')  # e.g. "slow gpu" on a GPU box

@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_notebook(nb):
    cmd = [str(Path(sys.executable).parent/'nbdev-test'), str(nb)] + (['--flags', FLAGS] if FLAGS else [])
    r = subprocess.run(cmd, cwd=ROOT/'nbs', capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{nb.name} failed:\n{r.stdout[-6000:]}\n{r.stderr[-6000:]}"
