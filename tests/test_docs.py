"The documentation site (`make docs`, tools/docs.py): built once here as make builds it, every internal link resolves, nothing loads from the network, every source has its page, and pages show their saved outputs."
import json, re, shutil, subprocess, sys
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT/'tools'))
import docs

class _Page(HTMLParser):
    "A page's ids, its (tag, attribute, url) references, its title and its text."
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.refs, self.text, self.title, self._in = set(), [], [], '', []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get('id'): self.ids.add(a['id'])
        if tag == 'a' and a.get('name'): self.ids.add(a['name'])
        self.refs += [(tag, k, a[k]) for k in ('href', 'src') if a.get(k) is not None]
        self._in.append(tag)
    def handle_endtag(self, tag):
        while self._in and self._in.pop() != tag: pass
    def handle_data(self, data):
        if 'title' in self._in: self.title += data
        elif not {'script', 'style'} & set(self._in): self.text.append(data)

def parse(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    return p

def pages(site: Path) -> dict:
    "Every page of the site, parsed, by path."
    return {p: parse(p.read_text()) for p in sorted(site.rglob('*.html'))}

def saved_output(nb: Path) -> str:
    "The first line (of 6+ characters) a shown cell of notebook `nb` printed or displayed, as saved in it."
    for c in json.loads(nb.read_text())['cells']:
        if c['cell_type'] != 'code' or docs._is_hidden(c): continue
        for o in c.get('outputs', []):
            t = docs._text(o.get('text') or o.get('data', {}).get('text/plain', ''))
            line = next((l.strip() for l in t.splitlines() if len(l.strip()) >= 6), None)
            if line: return line
    raise AssertionError(f'{nb} has no saved output to look for')

CHANGED = []   # the build's changes to the sources, which must be none
SHOWN = ['nbs/00b_stats.ipynb', 'nbs/04_store_b_latency.ipynb', 'nbs/tutorials/own_task.ipynb']   # pages with saved outputs

@pytest.fixture(scope='module')
def site(tmp_path_factory) -> Path:
    "The site, built once for this module as `make docs` builds it (tools/docs.py), into a temporary folder."
    out = tmp_path_factory.mktemp('site')
    before = _sources()
    subprocess.run([sys.executable, str(ROOT/'tools/docs.py'), str(out)], check=True, cwd=ROOT)
    CHANGED[:] = sorted(set(before.items()) ^ set(_sources().items()))
    return out/'html'

def _sources() -> dict:
    "Each file under nbs/ and docs/ with its size and modification time, and the names at the repository's top."
    files = {str(p.relative_to(ROOT)): (p.stat().st_size, p.stat().st_mtime_ns) for d in ('nbs', 'docs') for p in (ROOT/d).rglob('*') if p.is_file()}
    return {**files, **{p.name: 'top' for p in ROOT.iterdir()}}

def test_links_resolve_and_nothing_loads_from_the_network(site):
    "Every relative href/src of every page names a file of the site, its #anchor an id there; no script or css from http(s)."
    parsed, bad, remote = pages(site), [], []
    for page, p in parsed.items():
        for tag, attr, url in p.refs:
            u = urlsplit(url)
            if tag in ('script', 'link') and (u.scheme in ('http', 'https') or url.startswith('//')): remote.append((page.name, tag, url))
            if u.scheme or url.startswith('//'): continue   # http(s): papers and GitHub, mailto:
            target = (page.parent/unquote(u.path)).resolve() if u.path else page
            if target.is_dir(): target = target/'index.html'
            if not target.is_file() or site.resolve() not in target.parents: bad.append((str(page.relative_to(site)), url)); continue
            if u.fragment and target.suffix == '.html' and unquote(u.fragment) not in parsed[target].ids:
                bad.append((str(page.relative_to(site)), url))
    assert not remote, f'loaded from the network: {remote[:10]}'
    assert not bad, f'{len(bad)} internal links that resolve to nothing: {bad[:20]}'

def test_every_source_has_a_page(site):
    "A page for the front page, every component, continuation, experiment and tutorial notebook, every docs/*.md, and the API."
    nbs = docs.notebooks()
    assert len([n for n in nbs if n.parent == Path('nbs')]) >= 40 and any('experiments' in n.parts for n in nbs)
    assert any('tutorials' in n.parts for n in nbs) and any('_b_' in n.name for n in nbs)
    sources = [Path('nbs/index.ipynb'), *nbs, *(p.relative_to(ROOT) for p in sorted((ROOT/'docs').glob('*.md')))]
    missing = [str(s) for s in sources if not (site/docs.page_of(s)).is_file()]
    assert not missing, f'no page for {missing}'
    for s in [Path('nbs/index.ipynb'), *nbs]:
        assert parse((site/docs.page_of(s)).read_text()).title.startswith(docs.title(ROOT/s).replace('`', '')), s
    api = parse((site/'api/cove.stats.html').read_text())
    assert {'cove.stats.paired', 'cove.stats.rate_ci', 'cove.stats.Paired'} <= api.ids
    assert 'Rates, difference with Newcombe' in ''.join(api.text)   # paired's docstring
    assert all((site/f'api/{m}.html').is_file() for m in docs.modules()) and 'cove.router' in docs.modules()
    text = ''.join(parse((site/docs.page_of(SHOWN[0])).read_text()).text)
    assert saved_output(ROOT/SHOWN[0]) in text and '#| export' not in text   # outputs shown, directives not

def test_the_source_tree_is_untouched(site):
    "The build wrote nothing into the sources: no file under nbs/ or docs/ added, changed or removed, nothing new at the top."
    assert not CHANGED, CHANGED[:10]

def _chromium():
    return next((shutil.which(c) for c in ('chromium', 'chromium-browser', 'google-chrome') if shutil.which(c)), None)

@pytest.mark.parametrize('src', SHOWN)
def test_pages_in_a_browser(site, src):
    "Headless Chromium loads the page from file://: its title and a text the notebook's cells saved as output are there."
    exe = _chromium()
    if not exe: pytest.skip('no chromium, chromium-browser or google-chrome on PATH (apt-get install chromium)')
    url = (site/docs.page_of(src)).resolve().as_uri()
    r = subprocess.run([exe, '--headless', '--disable-gpu', '--no-sandbox', '--no-first-run', '--disable-extensions',
                        '--virtual-time-budget=3000', '--dump-dom', url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and '<html' in r.stdout, r.stderr[-2000:]
    dom = parse(r.stdout)
    assert dom.title.startswith(docs.title(ROOT/src).replace('`', '')), (dom.title, src)
    assert saved_output(ROOT/src) in ''.join(dom.text), (saved_output(ROOT/src), src)
