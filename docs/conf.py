# Sphinx configuration of the documentation site: `make docs` (tools/docs.py) builds it from a staged copy of the
# sources, offline. Notebooks are rendered with their saved outputs (myst-nb, never executed); the API reference is
# autodoc on the `cove` package of this checkout. Math (`$...$`, `$$...$$`, amsmath environments in the markdown) is
# typeset by MathJax 3.2.2 shipped with the site from the sphinx-mathjax-offline package (no CDN).
import importlib.util, re, shutil, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # cove of this checkout

project = 'cove'
copyright = '%Y, the cove developers'     # the footer's line; Sphinx puts the year of the build (or SOURCE_DATE_EPOCH's)
extensions = ['myst_nb', 'sphinx.ext.autodoc', 'sphinx.ext.mathjax']
myst_enable_extensions = ['dollarmath', 'amsmath']   # `$x$`, `$$x$$` and \begin{align} are math, their text kept as written
mathjax_path = 'mathjax/tex-chtml.js'     # in _static/: copied there from sphinx-mathjax-offline after the build
nb_execution_mode = 'off'                  # saved outputs only
nb_ipywidgets_js = {}                      # a saved widget view never loads require.js or widgets from a CDN
myst_heading_anchors = 4                   # `page.md#a-heading` links, as on GitHub
html_theme = 'alabaster'                   # ships with Sphinx: no web fonts, no CDN
html_title = 'cove'
html_copy_source = False
html_show_sourcelink = False
smartquotes = False                        # text as written: ' stays '
html_theme_options = {'page_width': '1180px', 'sidebar_width': '240px',   # room for 120-column code
                      'show_relbar_bottom': True}   # previous / next under each page, as in the sidebar
autodoc_member_order = 'bysource'
suppress_warnings = ['myst.header']        # notebooks go from `#` to `###` by design

_CODE = re.compile(r'(`+)(.+?)\1')

def _md_to_rst(text: str) -> str:
    "A markdown docstring line (nbdev's: `x` is code) as reST: ``x`` joined to its neighbours, `*`, `|`, `\\` as text."
    out, i = [], 0
    for m in _CODE.finditer(text):
        out += [re.sub(r'([*|\\])', r'\\\1', text[i:m.start()]), '\\ ``' + m.group(2).strip() + '``\\ ']
        i = m.end()
    return ''.join(out) + re.sub(r'([*|\\])', r'\\\1', text[i:])

def _docstring(app, what, name, obj, options, lines):
    lines[:] = [_md_to_rst(l) for l in lines]

# What tex-chtml.js loads at run time: the TeX extensions it autoloads, its fonts, the menu's accessibility parts
# (speech rule engine included): 6.9 MB; the package's other builds (SVG output, MathML input: 17 of its 24 MB) stay out.
_MATHJAX = ['tex-chtml.js', 'input/tex/extensions', 'output/chtml/fonts/woff-v2', 'a11y', 'sre', 'ui']

def _copy_mathjax(app, exc):
    "Copy MathJax's files into the site's _static/mathjax/, each only if it is not there already, as it is."
    if exc is not None or app.builder.format != 'html': return
    spec = importlib.util.find_spec('sphinx-mathjax-offline')   # the package's folder is named so (pip install sphinx-mathjax-offline)
    if spec is None: raise RuntimeError('MathJax for the site: pip install sphinx-mathjax-offline (in the dev extra)')
    src, dst = Path(spec.submodule_search_locations[0])/'static/mathjax', Path(app.outdir)/'_static/mathjax'
    for part in _MATHJAX:
        for f in ([src/part] if (src/part).is_file() else sorted((src/part).rglob('*'))):
            to = dst/f.relative_to(src)
            if f.is_file() and not (to.exists() and to.stat().st_size == f.stat().st_size and to.read_bytes() == f.read_bytes()):
                to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, to)

def setup(app):
    app.connect('autodoc-process-docstring', _docstring)
    app.connect('build-finished', _copy_mathjax)
