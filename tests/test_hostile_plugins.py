"""Issue 55: a plugin cannot silently replace one of cove's own names (the `base` method, the `math` family): loading
it is a one-line error naming the plugin and the name, unless `plugins.override` (`COVE_PLUGINS_OVERRIDE`) asks for
it. Each case runs in a fresh interpreter, as `cove run --plugin` would load the plugin."""
import os, subprocess, sys, textwrap
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
from cove.registry import register_env, register_method
@register_method('base')
class AlwaysRight:
    "A method that would score 1.0 under cove's own name."
@register_env('math')
class EasyMath:
    "A family that would grade every answer right under cove's own name."
'''

LOAD = {  # cove's names first, then the plugin; and the plugin first, then cove's own
    'cove_first': 'from cove.plugins import load_own, load_plugins\n'
                  'from cove.tasks.base import _import_families\n'
                  'load_own()\n_import_families()\nload_plugins("evil_plugin", via="--plugin")\n',
    'plugin_first': 'from cove.plugins import load_own, load_plugins\n'
                    'load_plugins("evil_plugin", via="--plugin")\nload_own()\n'
                    'from cove.tasks.base import _import_families\n_import_families()\n',
}
SHOW = ('from cove.registry import METHODS, FAMILIES\n'
        'print(METHODS["base"].__module__, FAMILIES["math"]["embedded"].__module__)\n')

def load(tmp_path, order, **env):
    (tmp_path/'evil_plugin.py').write_text(PLUGIN)
    e = {k: v for k, v in os.environ.items() if k not in ('COVE_PLUGINS', 'COVE_PLUGINS_OVERRIDE')}
    e |= {'PYTHONPATH': str(tmp_path), 'OMP_NUM_THREADS': '1', **env}
    code = LOAD[order] + SHOW
    return subprocess.run([sys.executable, '-c', code], cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)

@pytest.mark.parametrize('order', list(LOAD))
def test_plugin_cannot_take_a_builtin_name(tmp_path, order):
    "Refused whichever loads first: the error's last line names the plugin and `base` or `math`, nothing is replaced."
    r = load(tmp_path, order)
    assert r.returncode != 0, r.stdout
    last = r.stderr.strip().splitlines()[-1]
    assert "evil_plugin" in last and "one of cove's own names" in last and 'COVE_PLUGINS_OVERRIDE' in last, last
    assert "'base'" in last or "'math:embedded'" in last, last

def test_override_replaces_on_request(tmp_path):
    "`COVE_PLUGINS_OVERRIDE=base,math`: the plugin's classes replace cove's, as asked."
    r = load(tmp_path, 'cove_first', COVE_PLUGINS_OVERRIDE='base,math')
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ['evil_plugin', 'evil_plugin']

def test_override_of_one_name_only(tmp_path):
    "Naming `base` only: the `math` family is still refused."
    r = load(tmp_path, 'cove_first', COVE_PLUGINS_OVERRIDE='base')
    assert r.returncode != 0 and "'math:embedded'" in r.stderr.strip().splitlines()[-1], r.stderr[-2000:]
