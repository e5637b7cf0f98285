# Sphinx configuration of the documentation site: `make docs` (tools/docs.py) builds it from a staged copy of the
# sources, offline. Notebooks are rendered with their saved outputs (myst-nb, never executed); the API reference is
# autodoc on the `cove` package of this checkout.
import re, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # cove of this checkout

project = 'cove'
extensions = ['myst_nb', 'sphinx.ext.autodoc']
nb_execution_mode = 'off'                  # saved outputs only
nb_ipywidgets_js = {}                      # a saved widget view never loads require.js or widgets from a CDN
myst_heading_anchors = 4                   # `page.md#a-heading` links, as on GitHub
html_theme = 'alabaster'                   # ships with Sphinx: no web fonts, no CDN
html_title = 'cove'
html_copy_source = False
html_show_sourcelink = False
smartquotes = False                        # text as written: ' stays '
html_theme_options = {'page_width': '1180px', 'sidebar_width': '240px'}   # room for 120-column code
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

def setup(app): app.connect('autodoc-process-docstring', _docstring)
