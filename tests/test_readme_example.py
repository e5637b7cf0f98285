"Issue 44 item 7: README's Python example runs as written (the embedded model, a run folder under the working folder)."
import re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def readme_example() -> str:
    "The first ```python block of README.md."
    blocks = re.findall(r'^```python\n(.*?)^```', (ROOT/'README.md').read_text(), flags=re.M | re.S)
    assert blocks, 'README.md has no ```python example'
    return blocks[0]

def test_readme_python_example_runs(tmp_path):
    code = readme_example()
    r = subprocess.run([sys.executable, '-c', code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    runs = [p for p in (tmp_path/'outputs').rglob('episodes.jsonl')]
    assert runs and all(p.read_text().count('\n') > 0 for p in runs), runs   # it played and recorded episodes
    assert r.stdout.strip(), 'the example prints its result'
