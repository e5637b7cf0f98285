"""Run every component notebook's tests (nbdev's `test_nb`), one pytest test per notebook.

Each pytest worker keeps one notebook process (`tests/_nbrun.py`), which tests its notebooks in turn as `nbdev-test`'s
own pool does: the heavy imports happen once per worker, not once per notebook. A notebook that hangs past its limit
takes its process with it; the next notebook gets a fresh one."""
import concurrent.futures as cf, multiprocessing as mp, os
from pathlib import Path
import pytest
import _nbrun

ROOT = Path(__file__).resolve().parents[1]
NBS = sorted((ROOT/'nbs').glob('[0-9]*.ipynb')) + sorted((ROOT/'nbs'/'tutorials').glob('*.ipynb'))   # and the tutorials
FLAGS = os.environ.get('COVE_NB_FLAGS', '')  # e.g. "slow gpu" on a GPU box
LIMIT_S = 900   # per notebook

class Runner:
    "One spawned process (a clean interpreter, not a fork of this worker) that tests notebooks one after another."
    def __init__(self): self.pool = None
    def __call__(self, nb:Path) -> tuple[bool, str, float]:
        if self.pool is None: self.pool = cf.ProcessPoolExecutor(1, mp_context=mp.get_context('spawn'))
        fut = self.pool.submit(_nbrun.run, str(nb), FLAGS)
        try: return fut.result(timeout=LIMIT_S)
        except (cf.TimeoutError, cf.process.BrokenProcessPool) as e:
            self.close(kill=True)
            return False, (f'{type(e).__name__}: the notebook process did not finish {nb.name} within {LIMIT_S} s '
                           'or died'), LIMIT_S
    def close(self, kill=False):
        if self.pool is None: return
        if kill:
            for p in list(self.pool._processes.values()): p.kill()
        self.pool.shutdown(wait=not kill, cancel_futures=True)
        self.pool = None

@pytest.fixture(scope='module')
def runner():
    r = Runner()
    yield r
    r.close(kill=True)   # its notebooks are done; waiting for the interpreter to wind down took up to 20 s

@pytest.mark.parametrize('nb', NBS, ids=[p.stem for p in NBS])
def test_notebook(nb, runner):
    ok, err, secs = runner(nb)
    assert ok, f"{nb.name} failed after {secs:.0f} s:\n{err[-8000:]}"
