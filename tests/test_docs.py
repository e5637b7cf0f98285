"""The documentation site (`make docs`, tools/docs.py): built once here as make builds it, every internal link resolves,
nothing loads from the network, every source has its page, and pages show their saved outputs."""
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
    """A page's ids, its (tag, attribute, url) references, its title, its text (and of it the prose: outside code), the
    text of its math elements apart."""
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids, self.refs, self.text, self.math, self.prose, self.title, self._in = set(), [], [], [], [], '', []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get('id'): self.ids.add(a['id'])
        if tag == 'a' and a.get('name'): self.ids.add(a['name'])
        self.refs += [(tag, k, a[k]) for k in ('href', 'src') if a.get(k) is not None]
        self._in.append((tag, 'math' in (a.get('class') or '').split()))
    def handle_endtag(self, tag):
        while self._in and self._in.pop()[0] != tag: pass
    def handle_data(self, data):
        tags = {t for t, _ in self._in}
        if 'title' in tags: self.title += data
        elif {'script', 'style'} & tags: return
        elif any(m for _, m in self._in): self.math.append(data)
        else:
            self.text.append(data)
            if not {'pre', 'code'} & tags: self.prose.append(data)

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
# pages with saved outputs
SHOWN = ['nbs/00b_stats.ipynb', 'nbs/04_store_b_latency.ipynb', 'nbs/tutorials/own_task.ipynb']

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
    files = {str(p.relative_to(ROOT)): (p.stat().st_size, p.stat().st_mtime_ns) for d in ('nbs', 'docs')
             for p in (ROOT/d).rglob('*') if p.is_file()}
    return {**files, **{p.name: 'top' for p in ROOT.iterdir()}}

def test_links_resolve_and_nothing_loads_from_the_network(site):
    """Every relative href/src of every page names a file of the site, its #anchor an id there; no script or css from
    http(s)."""
    parsed, bad, remote = pages(site), [], []
    for page, p in parsed.items():
        for tag, attr, url in p.refs:
            u = urlsplit(url)
            if tag in ('script', 'link') and (u.scheme in ('http', 'https') or url.startswith('//')):
                remote.append((page.name, tag, url))
            if u.scheme or url.startswith('//'): continue   # http(s): papers and GitHub, mailto:
            target = (page.parent/unquote(u.path)).resolve() if u.path else page
            if target.is_dir(): target = target/'index.html'
            if not target.is_file() or site.resolve() not in target.parents:
                bad.append((str(page.relative_to(site)), url)); continue
            if u.fragment and target.suffix == '.html' and unquote(u.fragment) not in parsed[target].ids:
                bad.append((str(page.relative_to(site)), url))
    assert not remote, f'loaded from the network: {remote[:10]}'
    assert not bad, f'{len(bad)} internal links that resolve to nothing: {bad[:20]}'

def test_every_source_has_a_page(site):
    """A page for the front page, every component, continuation, experiment and tutorial notebook, every docs/*.md, and
    the API."""
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
    """The build wrote nothing into the sources: no file under nbs/ or docs/ added, changed or removed, nothing new at
    the top."""
    assert not CHANGED, CHANGED[:10]

def _chromium():
    return next((shutil.which(c) for c in ('chromium', 'chromium-browser', 'google-chrome') if shutil.which(c)), None)

@pytest.mark.parametrize('src', SHOWN)
def test_pages_in_a_browser(site, src):
    """Headless Chromium loads the page from file://: its title and a text the notebook's cells saved as output are
    there."""
    exe = _chromium()
    if not exe: pytest.skip('no chromium, chromium-browser or google-chrome on PATH (apt-get install chromium)')
    url = (site/docs.page_of(src)).resolve().as_uri()
    r = subprocess.run([exe, '--headless', '--disable-gpu', '--no-sandbox', '--no-first-run', '--disable-extensions',
                        '--virtual-time-budget=3000', '--dump-dom', url], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and '<html' in r.stdout, r.stderr[-2000:]
    dom = parse(r.stdout)
    assert dom.title.startswith(docs.title(ROOT/src).replace('`', '')), (dom.title, src)
    assert saved_output(ROOT/src) in ''.join(dom.text), (saved_output(ROOT/src), src)

def test_math_is_typeset_by_mathjax_from_the_site(site):
    ("Markdown `$...$` is math (no raw `$\\mathcal` left in the prose), backslashes kept; each page with math loads "
     "MathJax from the site.")
    parsed = pages(site)
    raw = {str(pg.relative_to(site)): m.group(0) for pg, p in parsed.items()
           for m in [re.search(r'\$\\[A-Za-z]+', ''.join(p.prose))] if m}
    assert not raw, f'raw TeX outside a math element: {raw}'
    with_math = {pg: p for pg, p in parsed.items() if p.math}
    for nb in ('nbs/13_workflow.ipynb', 'nbs/14_memrl.ipynb', 'nbs/02_llm.ipynb', 'nbs/16_evolver.ipynb'):
        assert site/docs.page_of(nb) in with_math, f'{nb}: no math element'
    math = ''.join(parsed[site/docs.page_of('nbs/02_llm.ipynb')].math)
    assert r'\mathrm{train\_tokens} = n_{param} \times 14100' in math, math[:500]
    assert r'\mathcal{K}_r' in ''.join(parsed[site/docs.page_of('nbs/13_workflow.ipynb')].math)
    for pg, p in with_math.items():
        srcs = [(pg.parent/unquote(u)).resolve() for t, k, u in p.refs if t == 'script' and k == 'src'
                and 'mathjax' in u.lower()]
        assert srcs and all(s.is_file() and site.resolve() in s.parents for s in srcs), (pg, srcs)
    mj = site/'_static/mathjax'
    assert (mj/'tex-chtml.js').stat().st_size > 500_000 and any((mj/'output/chtml/fonts/woff-v2').glob('*.woff'))
    assert (mj/'input/tex/extensions/boldsymbol.js').is_file()   # what tex-chtml.js autoloads

def test_every_experiment_page_shows_a_figure(site):
    """Each experiment page shows its latest recorded run (dated, model, dtype) and at least one figure, an image of the
    site."""
    exps = [n for n in docs.notebooks() if n.parent.name == 'experiments']
    assert len(exps) >= 11
    report, no_figure = docs.smoke_report(), []
    for nb in exps:
        page = site/docs.page_of(nb)
        p = parse(page.read_text())
        text = ' '.join(''.join(p.text).split())
        assert 'Latest recorded run' in text and report['date'] in text and report['dtype'] in text, nb
        imgs = [(page.parent/unquote(u)).resolve() for t, k, u in p.refs if t == 'img' and k == 'src']
        if not imgs or not all(i.is_file() and i.stat().st_size > 1000 for i in imgs):
            no_figure.append(nb.stem); continue
        if nb.stem not in report['figures']:   # a wiring run's figure: dated, and said to be no result
            assert ('tiny random model' in text and 'say nothing about any method' in text
                    and re.search(r'run \d{4}-\d\d-\d\d on ', text)), nb
    assert not no_figure, f'experiment pages without a figure: {no_figure}'

def _sidebar_links(page: Path, site: Path) -> list:
    "The documents the sidebar of `page` links, in order, as site paths without suffix (its own: `href=\"#\"`)."
    html = page.read_text()
    side = html[html.index('class="sphinxsidebar"'):]
    hrefs = re.findall(r'<a class="(?:current )?reference internal" href="([^"#]*)',
                       side[:side.index('class="footer"')])
    return [str((page.parent/h).resolve().relative_to(site.resolve()).with_suffix('')) if h
            else str(page.relative_to(site).with_suffix('')) for h in hrefs]

def _rel(html: str, rel: str) -> str:
    m = re.search(rf'<link rel="{rel}"[^>]*href="([^"]+)"', html)
    return m and m.group(1)

def test_the_sidebar_is_a_reading_order(site):
    """Every page's sidebar: the tutorial, the component notebooks in number order, the experiments, then docs/ and the
    API; previous / next follow it."""
    order = [d for ds in docs.reading_order().values() for d in ds]
    assert (order[0] == 'nbs/tutorials/own_task'
            and order.index('nbs/00_core') < order.index('nbs/experiments/api_renaming') < order.index('api/index'))
    for page in (site/'index.html', site/'nbs/05c_math.html', site/'docs/running.html'):
        html, links = page.read_text(), _sidebar_links(page, site)
        shown = [d for d in links if d in order]
        assert (shown == [d for d in order if d in shown]
                and set(order) <= set(links)), (page, [d for d in order if d not in links][:5])
        for caption in docs.reading_order(): assert caption in unescape(html), (page, caption)
    front = (site/'index.html').read_text()
    assert _rel(front, 'next') == 'nbs/tutorials/own_task.html' and 'id="rellinks"' in front
    tut = (site/'nbs/tutorials/own_task.html').read_text()
    assert _rel(tut, 'prev') == '../../index.html' and _rel(tut, 'next') == '../00_core.html'
    last = docs.reading_order()["The paper, section by section"][-1]   # the last section leads to the experiments
    assert _rel((site/f'{last}.html').read_text(), 'next') == 'experiments/api_renaming.html'

def test_the_footer_is_filled(site):
    "Every page's footer carries the copyright line: the year and the project's name (not alabaster's empty '©.')."
    bad = []
    for page in sorted(site.rglob('*.html')):
        html = page.read_text()
        m = re.search(r'<div class="footer">(.*?)</div>', html, flags=re.S)
        foot = m and ' '.join(unescape(re.sub(r'<[^>]+>', ' ', m.group(1))).split())
        if not foot or not re.match(r'©\d{4}, the cove developers\.', foot):
            bad.append((str(page.relative_to(site)), foot and foot[:60]))
    assert not bad, bad[:5]

def test_a_cpu_scale_result_comes_first_on_its_page(tmp_path):
    "An experiment with a section \"`name` at CPU scale\" in docs/experiments.md shows it first, the smoke row after."
    md = tmp_path/'experiments.md'
    md.write_text('# E\n\n## At CPU scale\n\n### `memrl_epochs` at CPU scale\n\n| variant | SR |\n|---|---|\n'
                  '| memrl | 0.5 |\n\n![f](figures/x.png)\n\n### Another\n\ntext\n')
    cpu = docs.cpu_scale_runs(md)
    assert list(cpu) == ['memrl_epochs'] and cpu['memrl_epochs'].endswith('![f](figures/x.png)')
    src = docs.recorded_run('memrl_epochs', docs.smoke_report(), wiring={}, cpu=cpu)['source']
    assert src.index('| memrl | 0.5 |') < src.index('At its smoke defaults') < src.index('smoke report of')
    assert '](../../docs/figures/x.png)' in src   # links made relative to the page
    other = docs.recorded_run('calibration', docs.smoke_report(), wiring={}, cpu=cpu)['source']
    assert 'no result at CPU scale' in other and 'make experiments-cpu ONLY=calibration' in other   # says so
    assert 'no result at CPU scale' not in src and '| memrl | 0.5 |' not in other
    md.write_text(md.read_text().replace('# E\n', '# E\n\n## The latest report: every notebook at its smoke defaults\n\n'
                  'on the idle 2-core machine (2026-12-01, M, fp32, greedy)\n\n| notebook | a |\n|---|---|\n'
                  '| `memrl_epochs` | x |\n'))
    assert docs.smoke_report(md)['figures'] == {}   # its images are the CPU-scale run's, not the smoke report's
