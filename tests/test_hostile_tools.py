"""Issue 55: tools/report.py and tools/sweep.py refuse every bad `--params`, `--out`, `--run-id`, number and `--cell`
in one line with exit 2, before anything is written (they printed 12 tracebacks)."""
import json, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

def _one_line_refusal(r, *names):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-800:])
    assert all(n in lines[0] for n in names), lines

@pytest.mark.parametrize('args, names', [
    (['--params', '{bad'], ['--params', 'not JSON']), (['--params', '[1, 2]'], ['--params', 'not a list']),
    (['--params', 'null'], ['--params']), (['--out', 'FILE'], ['--out', 'a file']),
    (['--out', 'FILE/below'], ['--out', 'lies under']), (['--out', ''], ['--out']),
    (['--run-id', '../../escape'], ['--run-id']), (['--timeout', 'nan'], ['--timeout']),
    (['--timeout', '-1'], ['--timeout']), (['--workers', '-3', '--seeds', '0'], ['--workers']),
    (['--num-cpus', 'inf', '--engine', 'local'], ['--num-cpus']),
    (['--check-params', 'no/such.ipynb'], ['--check-params']),
])
def test_report_refuses_bad_arguments(args, names, tmp_path, hostile):
    (tmp_path/'FILE').write_text('a file')
    args = [str(tmp_path/a) if a.startswith('FILE') else a for a in args]
    out = [] if '--out' in args else ['--out', str(tmp_path/'reports')]
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'report.py'), '--model', 'tiny', *out, *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    _one_line_refusal(r, *names)
    assert not (tmp_path/'reports').exists() and not (tmp_path.parent/'escape').exists()
    assert (tmp_path/'FILE').read_text() == 'a file'
    hostile.refused()

GOOD = dict(path=str(ROOT/'nbs'/'experiments'), out='OUT', params={}, name='x', dir='x', seed=0)

@pytest.mark.parametrize('cell, why', [
    ('{bad', 'not JSON'), ('[1]', 'a JSON object'), (json.dumps({'path': 1}), 'needs path (str)'),
    (json.dumps(GOOD | {'path': '/etc/passwd'}), 'not a notebook file'),
    (json.dumps(GOOD | {'seed': 'x'}), 'seed must be an integer'),
    (json.dumps(GOOD | {'timeout': -5}), 'timeout must be a positive number'),
    (json.dumps(GOOD | {'out': 'FILE'}), 'a file, not a folder'),
])
def test_sweep_cell_refuses_bad_cells(cell, why, tmp_path, hostile):
    (tmp_path/'FILE').write_text('a file')
    nb = next((ROOT/'nbs'/'experiments').glob('*.ipynb'))
    cell = cell.replace(json.dumps(str(ROOT/'nbs'/'experiments')), json.dumps(str(nb)))
    cell = cell.replace('"OUT"', json.dumps(str(tmp_path/'out'))).replace('"FILE"', json.dumps(str(tmp_path/'FILE')))
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'sweep.py'), '--cell', cell], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    _one_line_refusal(r, '--cell' if why != 'a file, not a folder' else '--out', why)
    assert not (tmp_path/'out').exists()
    hostile.refused()

def test_sweep_without_a_cell_says_its_usage(tmp_path):
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'sweep.py'), '--bogus'], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    _one_line_refusal(r, 'usage: tools/sweep.py --cell JSON')
