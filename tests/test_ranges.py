"Issue 24, item 6: a numeric key outside its range stops `cove run` with one line and exit 2, before anything loads."
import subprocess, sys
from pathlib import Path
import pytest
from cove.config import SCHEMA, RANGES, coerce, ConfigError
from cove.method import import_methods

BAD = ['train.lr=nan', 'train.lr=0', 'retrieval.k=-3', 'agent.shots=-2', 'trigger.k=-1', 'model.temperature=inf',
       'run.threads=-4', 'model.max_new_tokens=0', 'evolver.dedup=1.5']

@pytest.mark.parametrize('item', BAD)
def test_cli_refuses_out_of_range(item, tmp_path, hostile):
    out = tmp_path/'run'
    r = subprocess.run([str(Path(sys.executable).parent/'cove'), 'run', '--method', 'base', '--tasks', 'math',
                        '--episodes', '2', '--out', str(out), '--set', item], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr[-500:])
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and item.split('=')[0] in lines[0] and 'Traceback' not in r.stderr, r.stderr
    assert not out.exists()   # no folder left behind
    hostile.refused()

def test_every_numeric_key_is_ranged():
    "Each int/float key refuses something: a non-finite float, or a value below its lowest."
    import_methods()   # the methods declare their own keys as they load: cover those too
    assert 'memrl.k1' in SCHEMA and 'self_challenging.timeout' in SCHEMA
    for k, key in SCHEMA.items():
        if key.type not in (int, float): continue
        lo = RANGES.get(k, (0, None, True))[0]
        bad = float('nan') if key.type is float else (lo - 1 if lo is not None else None)
        if bad is None: continue   # an unbounded integer (run.seed)
        with pytest.raises(ConfigError): coerce(k, bad)
        assert coerce(k, key.default) == key.default   # the default is in range

def test_a_methods_own_key_is_set_on_the_command_line(tmp_path):
    """`memrl.q_min` is declared by `cove.memrl` itself, not by `cove.config`: `cove run --set` takes it (no --plugin),
    `cove info --config` lists it."""
    cove = str(Path(sys.executable).parent/'cove')
    base = [cove, 'run', '--method', 'oracle', '--tasks', 'math', '--episodes', '1', '--quiet']
    r = subprocess.run(base + ['--out', str(tmp_path/'ok'), '--set', 'memrl.q_min=-0.8'], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-500:]
    assert __import__('json').loads((tmp_path/'ok'/'config.json').read_text())['config']['memrl.q_min'] == '-0.8'
    r = subprocess.run(base + ['--out', str(tmp_path/'bad'), '--set', 'memrl.q_mni=-0.8'], capture_output=True,
                       text=True, timeout=120)
    assert (r.returncode == 2 and "unknown config key 'memrl.q_mni'" in r.stderr
            and not (tmp_path/'bad').exists()), r.stderr[-300:]
    r = subprocess.run([cove, 'info', '--config'], capture_output=True, text=True, timeout=120)   # and listed
    assert r.returncode == 0 and any(l.startswith('memrl.q_min ') for l in r.stdout.splitlines()), r.stdout[-300:]

def test_a_methods_key_loads_with_config_alone():
    "In a fresh process that imported no method, `load_config` takes a method's key from an override and from `COVE_*`."
    code = ("import sys; from cove.config import load_config; "
            "c = load_config(overrides={'coevo.kappa': 5}, env={'COVE_MEMRL_K1': '4'}); "
            "print(c['coevo.kappa'], c['memrl.k1'], c.sources['memrl.k1'], c['memrl.k2'])")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ['5.0', '4', 'env', '3'], r.stderr[-500:]
