"A wheel built from the repository holds every module `nbdev-export` writes, and each imports from the wheel itself."
import shutil, subprocess, sys, zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def test_wheel_holds_and_imports_every_module(tmp_path):
    src = tmp_path/'src'   # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    src.mkdir()
    for f in ('pyproject.toml', 'README.md'): shutil.copy(ROOT/f, src/f)
    shutil.copytree(ROOT/'cove', src/'cove', ignore=shutil.ignore_patterns('__pycache__'))
    r = subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '--no-build-isolation', '-w',
                        str(tmp_path/'dist'), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    whl, = (tmp_path/'dist').glob('cove-*.whl')
    names = set(zipfile.ZipFile(whl).namelist())
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT/'cove').rglob('*.py')}
    data = {p.relative_to(ROOT).as_posix() for p in (ROOT/'cove'/'data').glob('*.jsonl')}   # the hand-labelled cases
    # before: every file of cove/tasks/
    assert data and (want | data) - names == set(), f"missing from the wheel: {sorted((want | data) - names)}"
    site = tmp_path/'site'; zipfile.ZipFile(whl).extractall(site)
    mods = sorted(n[:-3].replace('/', '.').removesuffix('.__init__') for n in want)
    code = (f"import importlib, sys; sys.path.insert(0, {str(site)!r})\n"
            f"for m in {mods!r}:\n"
            f"    mod = importlib.import_module(m)\n"
            f"    assert mod.__file__.startswith({str(site)!r}), (m, mod.__file__)\n"
            f"from cove.core import read_cases\n"
            f"assert len(read_cases('routing_cases')) == 30\n"
            f"print(len({mods!r}))")
    # cwd: not the repository
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == str(len(mods))
