"""Issue 26: a family and a method of one's own, as a throwaway installed package (a `*.dist-info` with its
`entry_points.txt`, on the commands' PYTHONPATH), through `cove run`, `cove check`, `cove info` and `table2_main`.
The package is the tutorial's plugin (`nbs/tutorials/own_task.ipynb`: the files its `%%writefile` cells write), so
what the tutorial teaches is what is tested. Nothing is installed into the venv."""
import json, os, subprocess, sys, tomllib
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TUTORIAL = ROOT/'nbs'/'tutorials'/'own_task.ipynb'

def tutorial_files() -> dict[str, str]:
    "The files the tutorial's `%%writefile` cells write, by file name, as IPython writes them (`-a` appends)."
    files = {}
    for c in json.loads(TUTORIAL.read_text())['cells']:
        src = ''.join(c['source'])
        if c['cell_type'] != 'code' or not src.startswith('%%writefile'): continue
        head, _, body = src.partition('\n')
        name = Path(head.split()[-1].replace('{plugin}', 'units_plugin.py')).name
        files[name] = (files.get(name, '') if '-a' in head.split() else '') + body
    return files

def install(folder:Path, files:dict) -> Path:
    "What `pip install` of the tutorial's package leaves in a folder: the module, a dist-info with its entry points."
    folder.mkdir(parents=True)
    (folder/'units_plugin.py').write_text(files['units_plugin.py'])
    proj = tomllib.loads(files['pyproject.toml'])['project']
    info = folder/f"units_plugin-{proj['version']}.dist-info"
    info.mkdir()
    (info/'METADATA').write_text(f"Metadata-Version: 2.1\nName: {proj['name']}\nVersion: {proj['version']}\n")
    (info/'entry_points.txt').write_text(''.join(f"[{g}]\n" + ''.join(f"{k} = {v}\n" for k, v in eps.items()) + '\n'
                                                 for g, eps in proj['entry-points'].items()))
    return folder

@pytest.fixture(scope='module')
def sites(tmp_path_factory):
    "`installed`: the package with its entry points; `module`: the module alone (named with --plugin)."
    files, root = tutorial_files(), tmp_path_factory.mktemp('plugin')
    mod = root/'module'
    mod.mkdir()
    (mod/'units_plugin.py').write_text(files['units_plugin.py'])
    return dict(installed=install(root/'installed', files), module=mod)

def env_with(site:Path|None, **extra) -> dict:
    "The environment of a command with `site` first on its PYTHONPATH."
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'COVE_PLUGINS')}
    return env | ({'PYTHONPATH': str(site)} if site else {}) | extra

def cove(*args, site:Path|None=None, **extra) -> subprocess.CompletedProcess:
    env = env_with(site, **extra)
    return subprocess.run([str(BIN/'cove'), *args], env=env, capture_output=True, text=True, timeout=600)

RUN = ['run', '--tasks', 'units', '--method', 'last_success', '--episodes', '2', '--model', 'tiny', '--quiet',
       '--set', 'model.max_new_tokens=8', '--set', 'units.difficulty=1']

@pytest.fixture(scope='module')
def run_dir(sites, tmp_path_factory):
    "A `cove run` of the installed plugin's family and method, named nowhere but in --tasks and --method."
    out = tmp_path_factory.mktemp('runs')/'last_success'
    r = cove(*RUN, '--out', str(out), site=sites['installed'])
    assert r.returncode == 0, r.stderr[-3000:]
    return out

def test_tutorial_files():
    "The tutorial writes the module in pieces (appended) and a pyproject.toml declaring both entry points."
    files = tutorial_files()
    assert set(files) == {'units_plugin.py', 'pyproject.toml'}
    src = files['units_plugin.py']
    assert "@register_env('units')" in src and "@register_method('last_success')" in src
    assert "declare_key('units.difficulty'" in src
    compile(src, 'units_plugin.py', 'exec')

def test_run_with_the_installed_plugin(run_dir):
    "`--tasks units --method last_success --set units.difficulty=1` with no --plugin: the entry points are found."
    recs = [json.loads(l) for l in (run_dir/'episodes.jsonl').read_text().splitlines()]
    assert [r['task_id'] for r in recs] == ['units-test-0-1-0', 'units-test-0-1-1']   # difficulty 1 reached UnitsEnv
    assert {r['method'] for r in recs} == {'last_success'}
    conf = json.loads((run_dir/'config.json').read_text())
    assert conf['config']['units.difficulty'] == 1 and 'units_plugin' in conf['plugins']
    state = json.loads((run_dir/'last_success.json').read_text())
    assert len(state['applied']) == 2 and state['method'] == 'last_success'

def test_check_with_and_without_the_plugin(run_dir, sites):
    "`cove check` checks the method's state where the plugin loads, and says in a FAIL line why not where it does not."
    r = cove('check', str(run_dir), site=sites['installed'])
    assert r.returncode == 0 and 'no problem' in r.stdout, r.stdout
    state = [l for l in r.stdout.splitlines() if 'last_success.json' in l]
    assert state and state[0].startswith('ok') and '2 applied, agreeing with the 2 records' in state[0], r.stdout
    r = cove('check', str(run_dir))   # no plugin here
    assert r.returncode == 1, r.stdout
    assert ('state not checked: method last_success not loaded '
            '(use --plugin units_plugin: the run had it loaded)') in r.stdout, r.stdout
    r = cove('check', str(run_dir), '--plugin', 'units_plugin', site=sites['module'])
    assert r.returncode == 0 and 'last_success.json' in r.stdout, r.stdout

def test_info_lists_the_plugin_keys(sites):
    r = cove('info', '--config', site=sites['installed'])
    assert r.returncode == 0, r.stderr
    lines = {l.split()[0]: l for l in r.stdout.splitlines()[1:] if l.strip()}
    assert 'units plugin: 0 whole amounts' in lines['units.difficulty'] and lines['last_success.k'].split()[1] == '2'

@pytest.mark.parametrize('how', ['--plugin', 'COVE_PLUGINS'])
def test_module_named_on_the_command_line(how, sites, tmp_path):
    "A module that is not installed, named by --plugin or $COVE_PLUGINS."
    args, extra = (['--plugin', 'units_plugin'], {}) if how == '--plugin' else ([], {'COVE_PLUGINS': 'units_plugin'})
    r = cove('run', '--tasks', 'units', '--method', 'oracle', '--episodes', '3', '--quiet', '--out', str(tmp_path/'o'),
             '--set', 'units.difficulty=1', *args, site=sites['module'], **extra)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)['overall']['success_rate'] == 1.0   # every reference solution passes its evaluator

def test_one_line_errors(sites, tmp_path):
    "An unknown family lists the known ones and the plugins loaded; a bad key, level or plugin is one line, exit 2."
    out = tmp_path/'r'
    cases = [(['run', '--tasks', 'unit', '--method', 'oracle', '--episodes', '2'], sites['installed'], {},
              ["unknown task family 'unit'; known: [", "'units']",
               'plugins loaded: units_plugin (entry point cove.families of units-plugin)']),
             (['run', '--tasks', 'units', '--method', 'last_succes', '--episodes', '2'], sites['installed'], {},
              ["unknown method 'last_succes'; known: [", "'last_success'", '; plugins loaded: units_plugin']),
             (['run', '--tasks', 'units', '--method', 'oracle', '--episodes', '2'], None, {},
              ["unknown task family 'units'; known: [", '; no plugin loaded (your own: --plugin MODULE']),
             ([*RUN[:-1], 'units.difficulty=5'], sites['installed'], {}, ['units.difficulty=5: must be <= 1']),
             ([*RUN, '--plugin', 'no_such_plugin'], sites['installed'], {},
              ["plugin 'no_such_plugin' (from --plugin) does not load: ModuleNotFoundError"]),
             (['info'], sites['module'], {'COVE_PLUGINS': 'units_plugin,json.nosuch'},
              ["plugin 'json.nosuch' (from COVE_PLUGINS) does not load: ModuleNotFoundError"]),
             (RUN, None, {}, ["unknown config key 'units.difficulty'", '; no plugin loaded'])]
    for args, site, extra, want in cases:
        r = cove(*args, *(['--out', str(out)] if args[0] == 'run' else []), site=site, **extra)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (args, r.stderr[-2000:])
        assert all(w in lines[0] for w in want), (want, lines[0])
    assert not out.exists()

def test_a_plugin_that_raises(tmp_path):
    "A plugin whose import fails is named with its error, in one line: never a traceback, never skipped."
    (tmp_path/'broken_plugin.py').write_text('import json\nraise RuntimeError("needs a GPU")\n')
    r = cove('info', '--plugin', 'broken_plugin', site=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == (
        "cove info: error: plugin 'broken_plugin' (from --plugin) does not load: RuntimeError: needs a GPU"), r.stderr

def test_table2_main_through_make_experiments(sites, tmp_path):
    """`tools/report.py --plugin` (what `make experiments ARGS=...` runs) hands the plugin to table2_main, which
    compares base and last_success on the plugin's family; the module is not installed, only on the path."""
    r = subprocess.run([sys.executable, str(ROOT/'tools'/'report.py'), '--only', 'table2_main', '--model', 'tiny',
                        '--plugin', 'units_plugin', '-p', 'families', 'units', '-p', 'methods', 'base,last_success',
                        '-p', 'episodes', '2', '--out', str(tmp_path), '--run-id', 'r', '--no-html-notebooks'],
                       env=env_with(sites['module'], OMP_NUM_THREADS='1'), capture_output=True, text=True, timeout=900)
    rep = json.loads((tmp_path/'r'/'report.json').read_text())
    assert r.returncode == 0 and rep[0]['status'] == 'ok', (rep, r.stdout[-2000:], r.stderr[-2000:])
    assert rep[0]['params']['plugins'] == 'units_plugin'
    m = json.loads((tmp_path/'r'/'table2_main'/'metrics.json').read_text())
    assert (m['families'], m['methods'], m['failed']) == (['units'], ['base', 'last_success'], {})
    assert [r['method'] for r in m['table']] == ['base', 'last_success']
    cols = set().union(*m['table'])   # COVE did not run: none of its columns, no token-ratio line
    assert not cols & {'hybrid', 'hybrid n', 'train_tokens_modelled', 'tok_per_inst_modelled'}, cols
    md = (tmp_path/'r'/'table2_main'/'table.md').read_text()
    assert 'Hybrid subset' not in md and 'COVE / Parametric-only' not in md, md
    r = cove('check', str(tmp_path/'r'/'table2_main'), '--plugin', 'units_plugin', site=sites['module'])
    assert r.returncode == 0, r.stdout

@pytest.mark.parametrize('body,why', [('import sys\nsys.exit(0)\n', 'SystemExit: 0'),
                                      ('import sys\nsys.exit("bye")\n', 'SystemExit: bye'),
                                      ('raise ValueError("no")\n', 'ValueError: no')])
def test_a_plugin_that_exits_or_raises_on_run(tmp_path, body, why):
    "Issue 42, item 7: a plugin that calls `sys.exit` or raises while it is imported is one line and exit 2, never 0."
    (tmp_path/'exiting_plugin.py').write_text(body)
    r = cove('run', '--tasks', 'math', '--method', 'oracle', '--episodes', '1', '--quiet', '--plugin', 'exiting_plugin',
             '--out', str(tmp_path/'r'), site=tmp_path)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-2000:])
    assert f"plugin 'exiting_plugin' (from --plugin) does not load: {why}" in lines[0], lines[0]
    assert not (tmp_path/'r').exists()

SEEN_PLUGIN = '''
from types import SimpleNamespace
from cove.method import Method, register_method

@register_method('seen_before')
class SeenBefore(Method):
    "Shows every earlier episode of the family (solved or not) as a knowledge entry: what a learning method shows."
    def __init__(self, cfg, out, policy=None):
        super().__init__(cfg, out, policy)
        self.seen = {}
    def run_batch(self, env, tasks):
        shown = [SimpleNamespace(id=f'seen-{i}', content=p) for i, p in enumerate(self.seen.get(env.family, []))]
        results = self.agent().run(env, tasks, entries=[shown] * len(tasks))
        self.seen.setdefault(env.family, []).extend(t.prompt for t in tasks)
        return results
'''

@pytest.mark.parametrize('chunk,shown', [(None, [0, 1, 2, 3, 4]), ('0', [0, 0, 0, 0, 0])])
def test_a_method_learns_between_episodes_of_a_short_run(tmp_path, chunk, shown):
    """Issue 43 item 1: in a run of fewer episodes than model.batch_size (16), each episode of a family sees what the
    method learnt from the family's earlier ones (run.family_chunk=1, the default); 0 batches them, learning after."""
    (tmp_path/'seen_plugin.py').write_text(SEEN_PLUGIN)
    out = tmp_path/'r'
    extra = ['--set', f'run.family_chunk={chunk}'] if chunk else []
    r = cove('run', '--plugin', 'seen_plugin', '--tasks', 'math', '--method', 'seen_before', '--episodes', '5',
             '--model', 'tiny', '--quiet', '--set', 'model.max_new_tokens=4', '--out', str(out), *extra, site=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    recs = sorted((json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines()), key=lambda x: x['episode'])
    assert [len(x['retrieved']) for x in recs] == shown
