#!/usr/bin/env python3
"""Write README.md from nbs/index.ipynb, the front page, as nbdev projects do (`nbdev-readme` needs Quarto).

The README is the notebook's cells in order: markdown as it stands; a code cell as a ```python block with its text
outputs, unless it is `#| hide` (directive lines are dropped). One comment line goes under the title, which stays the
first line. Standard library only, so `make readme` needs no .venv.

usage: tools/readme.py           write README.md
       tools/readme.py --check   exit 1 if README.md is not what the notebook gives
"""
import json, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INDEX, README = ROOT/'nbs'/'index.ipynb', ROOT/'README.md'
NOTE = '<!-- generated from nbs/index.ipynb by make readme; edit the notebook -->'

def _text(s) -> str: return ''.join(s) if isinstance(s, list) else s

def _code(cell) -> list:
    "A code cell as markdown blocks: its source without directives, then each text output; nothing for `#| hide`."
    lines = _text(cell['source']).splitlines()
    if any(l.replace(' ', '') == '#|hide' for l in lines): return []
    src = '\n'.join(l for l in lines if not l.startswith('#|')).strip('\n')
    outs = [_text(o.get('text') or o.get('data', {}).get('text/plain', '')).rstrip('\n') for o in cell.get('outputs', [])]
    return ([f'```python\n{src}\n```'] if src else []) + [f'```\n{o}\n```' for o in outs if o]

def render(index: Path = INDEX) -> str:
    "README.md's text from the notebook at `index`."
    parts = []
    for cell in json.loads(Path(index).read_text())['cells']:
        if cell['cell_type'] == 'markdown': parts.append(_text(cell['source']).strip('\n'))
        elif cell['cell_type'] == 'code': parts += _code(cell)
    title, _, rest = '\n\n'.join(p for p in parts if p).partition('\n')
    if not title.startswith('# '): raise ValueError(f'{index}: the first cell must open with a "# " title, not {title!r}')
    return f'{title}\n{NOTE}\n\n{rest.strip(chr(10))}\n'

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    text = render()
    if argv == ['--check']:
        same = README.exists() and README.read_text() == text
        if not same: print('README.md is not what nbs/index.ipynb gives: edit the notebook, then run `make readme`')
        return 0 if same else 1
    if argv: print(__doc__.split('usage:')[1].rstrip(), file=sys.stderr); return 2
    README.write_text(text)
    print(f'README.md: {text.count(chr(10))} lines from nbs/index.ipynb')
    return 0

if __name__ == '__main__': sys.exit(main())
