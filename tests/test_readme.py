"""The front page and the topic pages: README.md is what `make readme` writes from nbs/index.ipynb, and every relative
link resolves."""
import json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import readme

DOCS = sorted((ROOT/'docs').glob('*.md'))
PAGES = [ROOT/'README.md', *DOCS]

def _prose(text: str) -> str:
    "The text without fenced code blocks and inline code spans, where a `[x](y)` is no link and a `#` no heading."
    text = re.sub(r'^```.*?^```[^\n]*$', '', text, flags=re.M | re.S)
    return re.sub(r'`[^`\n]*`', '', text)

LINK = re.compile(r'!?\[(?:[^\]]|\][^(])*\]\(<?([^)>\s]+)>?(?:\s+"[^"]*")?\)')

def links(page: Path) -> list: return LINK.findall(_prose(page.read_text()))

def slug(heading: str) -> str:
    "GitHub's anchor for a heading: lower case, punctuation dropped but for `-` and `_`, spaces to `-`."
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')

def anchors(page: Path) -> set:
    "Every heading's anchor, a repeated one with GitHub's `-1`, `-2` suffixes."
    seen, out = {}, set()
    for h in re.findall(r'^#{1,6} +(.+?) *#*$', re.sub(r'^```.*?^```[^\n]*$', '', page.read_text(), flags=re.M | re.S),
                        flags=re.M):
        s = slug(h); n = seen.get(s, 0); seen[s] = n + 1
        out.add(s if n == 0 else f'{s}-{n}')
    return out

def test_readme_is_generated():
    "README.md is the notebook's text, so it is edited in nbs/index.ipynb: `make readme` (`tools/readme.py --check`)."
    assert (ROOT/'README.md').read_text() == readme.render(), ('README.md differs from nbs/index.ipynb: edit the '
                                                               'notebook, then run `make readme`')
    assert readme.main(['--check']) == 0

def test_readme_is_a_front_door():
    "A markdown title on the first line, at most 200 lines, a link to every topic page; index.ipynb exports nothing."
    lines = (ROOT/'README.md').read_text().splitlines()
    assert lines[0] == '# cove' and lines[1] == readme.NOTE and len(lines) <= 200, (lines[:2], len(lines))
    linked = {(ROOT/t.partition('#')[0]).resolve() for t in links(ROOT/'README.md')}
    assert not [p.name for p in DOCS if p.resolve() not in linked], 'a docs/ page the front page does not link'
    for cell in json.loads((ROOT/'nbs'/'index.ipynb').read_text())['cells']:
        assert not re.search(r'^#\|\s*(default_exp|export)', ''.join(cell['source']),
                             re.M), 'nbs/index.ipynb must export nothing'

def test_render_keeps_the_title_first(tmp_path):
    "The comment goes under the title; a code cell shows its source and text output, a `#| hide` cell nothing."
    def md(s): return {'cell_type': 'markdown', 'metadata': {}, 'source': s}
    def code(s, out=''):
        return {'cell_type': 'code', 'metadata': {}, 'source': s,
                'outputs': [{'output_type': 'stream', 'name': 'stdout', 'text': out}] if out else []}
    nb = tmp_path/'index.ipynb'
    nb.write_text(json.dumps({'cells': [md('# t\n\nintro'), code('#| hide\nimport os'),
                                        code('#| echo: true\n1+1', '2\n'), md(['## b\n', 'text'])]}))
    assert readme.render(nb) == f'# t\n{readme.NOTE}\n\nintro\n\n```python\n1+1\n```\n\n```\n2\n```\n\n## b\ntext\n'

def test_relative_links_resolve():
    "Every relative link and image in README.md and docs/*.md names an existing file, and its #anchor a heading there."
    bad = []
    for page in PAGES:
        for target in links(page):
            if re.match(r'[a-zA-Z][a-zA-Z0-9+.-]*:', target): continue   # http:, https:, mailto:
            path, _, frag = target.partition('#')
            dest = (page.parent/path).resolve() if path else page
            if not dest.exists(): bad.append(f'{page.relative_to(ROOT)}: {target} (no such file)')
            elif frag and dest.suffix == '.md' and frag not in anchors(dest):
                bad.append(f'{page.relative_to(ROOT)}: {target} (no such heading)')
    assert not bad, '\n'.join(bad)

def test_pages_do_not_repeat_paragraphs():
    "A paragraph of prose stands on one page only (README.md or one of docs/), so a figure is updated in one place."
    where = {}
    for page in PAGES:
        for para in re.split(r'\n\s*\n', re.sub(r'^```.*?^```[^\n]*$', '', page.read_text(), flags=re.M | re.S)):
            p = ' '.join(para.split())
            if len(p) >= 160 and not p.startswith('|'):
                where.setdefault(p, []).append(page.relative_to(ROOT).as_posix())
    assert not {p[:80]: w for p, w in where.items() if len(w) > 1}

def test_developing_names_every_make_target():
    "docs/developing.md lists every make target; docs/experiments.md names every experiment notebook."
    mk = (ROOT/'Makefile').read_text()
    targets = {t for line in re.findall(r'^\.PHONY:(.*)$', mk, re.M) for t in line.split() if '$' not in t}
    dev = (ROOT/'docs'/'developing.md').read_text()
    assert targets and not [t for t in sorted(targets) if f'`make {t}`' not in dev]
    assert '`make experiment-<name>`' in dev
    exp = (ROOT/'docs'/'experiments.md').read_text()
    assert not [p.stem for p in sorted((ROOT/'nbs'/'experiments').glob('*.ipynb')) if f'`{p.stem}`' not in exp]
