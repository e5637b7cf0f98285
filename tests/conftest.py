"Shared pytest hooks: the fault-injection suite's summary line (`tests/test_faults.py`), also from xdist workers."
import pytest

def pytest_configure(config): config._cove_faults = None

@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    "pytest-xdist: add up the counts a worker's `test_faults` module left in its `workeroutput`."
    got = getattr(node, 'workeroutput', {}).get('cove_faults')
    if got: node.config._cove_faults = {k: (node.config._cove_faults or {}).get(k, 0) + v for k, v in got.items()}

def pytest_terminal_summary(terminalreporter, config):
    t = config._cove_faults
    if t: terminalreporter.write_line(f"faults: {t['kills']} kills survived, {t['faults']} faults injected, {t['lost']} episodes lost")
