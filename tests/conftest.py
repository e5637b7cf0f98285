"""Shared pytest hooks: the fault-injection suite's summary line (`tests/test_faults.py` and the hostile-input tests),
also from xdist workers."""
from collections import Counter
import pytest

# this process's counts of hostile inputs refused, files outside a run folder touched, forged verdicts accepted
TALLY = Counter()

class Hostile:
    """What a hostile-input test saw: `refused()` an input turned away, `outside(n)` files it found touched, `forged(n)`
    verdicts accepted."""
    def refused(self, k:int=1): TALLY['hostile'] += k
    def outside(self, k:int): TALLY['outside'] += k
    def forged(self, k:int): TALLY['forged'] += k
    def keys(self, k:int): TALLY['keys'] += k     # answer keys (benchmark data, references, weights) the candidate read
    def mixed(self, k:int): TALLY['mixed'] += k   # resumes that went on with another run's records, store or data
    def hung(self, k:int): TALLY['hung'] += k     # calls still running past their deadline
    def tracebacks(self, k:int): TALLY['tracebacks'] += k   # commands that printed a traceback for a bad input

@pytest.fixture
def hostile() -> Hostile: return Hostile()

def pytest_configure(config): config._cove_faults = None

# the files whose tests run longest go first, so that pytest-xdist's two workers do not end on one long test while the
# other waits (a scheduling order, nothing more: every test still runs)
LONG_FIRST = ('test_notebooks.py', 'test_experiments', 'test_run_resume.py', 'test_faults.py', 'test_coevo.py',
              'test_evolver.py', 'test_plugins.py', 'test_memrl.py', 'test_workflow.py', 'test_baselines.py')

def pytest_collection_modifyitems(items):
    rank = lambda it: next((i for i, f in enumerate(LONG_FIRST) if it.path.name.startswith(f)), len(LONG_FIRST))
    items.sort(key=rank)   # stable: within a rank, collection order

def pytest_sessionfinish(session):
    # xdist: to the controller
    if hasattr(session.config, 'workeroutput'): session.config.workeroutput['cove_hostile'] = dict(TALLY)

@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist: add up the counts a worker's `test_faults` module and hostile-input tests left in its
    `workeroutput`."""
    out = getattr(node, 'workeroutput', {})
    if got := out.get('cove_faults'):
        node.config._cove_faults = {k: (node.config._cove_faults or {}).get(k, 0) + v for k, v in got.items()}
    TALLY.update(out.get('cove_hostile') or {})

def pytest_terminal_summary(terminalreporter, config):
    t = config._cove_faults or {}
    if not t and not TALLY: return
    terminalreporter.write_line(
        f"faults: {t.get('kills', 0)} kills survived, {t.get('faults', 0)} faults injected, {TALLY['hostile']} hostile "
        "inputs refused, "
        f"{t.get('lost', 0)} episodes lost, {TALLY['outside']} files outside the run folder touched, "
        f"{TALLY['forged']} forged verdicts accepted, {TALLY['keys']} answer keys readable, {TALLY['mixed']} resumes "
        f"mixed, {TALLY['hung']} calls hung past their deadline, {TALLY['tracebacks']} tracebacks")
