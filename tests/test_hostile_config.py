"""Issue 55, crashes and late checks: every numeric key has a range the machine can honour, checked before anything
is written; `cove check` checks what it reads from `config.json` the same way."""
import json, math, subprocess, sys
from pathlib import Path
import pytest
from cove.check import check_run
from cove.config import SCHEMA, ConfigError, coerce, load_config
from cove.method import import_methods
from cove.run import Run
from cove.spec import RunSpec, check_spec

COVE = str(Path(sys.executable).parent/'cove')

def test_every_numeric_key_refuses_a_number_the_machine_cannot_honour(hostile):
    "10**20, -10**20 and (floats) nan and inf: each refused in one line naming the key, by every int or float key."
    import_methods()   # the methods' own keys too
    n = 0
    for k, key in SCHEMA.items():
        if key.type not in (int, float): continue
        bad = [10**20, -10**20] + ([math.nan, math.inf, -math.inf, 1e300] if key.type is float else [])
        for v in bad:
            with pytest.raises(ConfigError) as e: coerce(k, v)
            assert k in str(e.value) and '\n' not in str(e.value), (k, v, e.value)
            n += 1
    assert n > 200
    hostile.refused(n)

@pytest.mark.parametrize('item', ['run.epochs=2000000000', 'run.threads=100000', 'model.timeout=1e300',
                                  'model.max_new_tokens=100000000000000000000', 'run.seed=9223372036854775808',
                                  'run.seed=-1'])
def test_cli_refuses_before_any_file(item, tmp_path, hostile):
    "`cove run` refuses each in one line naming the key, exit 2, before its run folder exists (memrl: its store)."
    out = tmp_path/'run'
    r = subprocess.run([COVE, 'run', '--method', 'memrl', '--tasks', 'math', '--episodes', '2', '--out', str(out),
                        '--set', item], capture_output=True, text=True, timeout=300)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and item.split('=')[0] in lines[0], r.stderr[-800:]
    assert not out.exists()
    hostile.refused()

def test_a_negative_seed_is_refused_by_name_before_memrl_writes(tmp_path, hostile):
    "A config built by hand past `load_config`: `Run` names `run.seed` and writes nothing (memrl wrote its store)."
    cfg = load_config(env={})
    cfg.values = cfg.values | {'run.seed': -1}
    for spec in [RunSpec('memrl', ['math'], 2, seed=-1), RunSpec('memrl', ['math'], 2, seed=0)]:
        with pytest.raises(ValueError, match=r'run\.seed=-1: must be >= 0'): Run(spec, cfg, tmp_path/'run')
    assert not (tmp_path/'run').exists()
    hostile.refused()

def test_a_stream_too_long_to_hold_is_refused():
    "Families x episodes x run.epochs past `MAX_STREAM` is refused before the stream is built."
    cfg = load_config(env={}, overrides={'run.epochs': 1000})
    with pytest.raises(ValueError, match='the run would play 2000000 episodes'):
        check_spec(RunSpec('oracle', ['math', 'tableqa'], 1000), cfg)

@pytest.fixture
def run_folder(tmp_path):
    out = tmp_path/'run'
    Run(RunSpec('oracle', ['math'], 1), load_config(env={}), out).execute(progress=False)
    return out

@pytest.mark.parametrize('edit, why', [
    (lambda c: c['spec'].update(tasks=7), 'spec.tasks must be a list of family names'),
    (lambda c: c['spec'].update(episodes='many'), 'episodes per family must be a whole number'),
    (lambda c: c['spec'].update(seed=2**63), 'run.seed=9223372036854775808: must be <='),
    (lambda c: c['spec'].update(colour='red'), "unexpected keyword argument 'colour'"),
    (lambda c: c['config'].update({'run.epochs': 20_000_000}), 'run.epochs=20000000: must be <= 1000'),
    (lambda c: c['config'].update({'model.timeout': 1e300}), 'model.timeout=1e+300: must be <= 86400'),
    (lambda c: c.update(config=[1, 2]), 'config is a list'),
])
def test_cove_check_checks_what_it_reads(run_folder, edit, why, hostile):
    "A `config.json` edited into something `cove run` never writes: one failed item saying why, no traceback, fast."
    p = run_folder/'config.json'
    conf = json.loads(p.read_text())
    edit(conf)
    p.write_text(json.dumps(conf))
    items = check_run(run_folder)
    bad = [why_ for i, ok, why_ in items if not ok and i == 'config.json']
    assert bad and why in bad[0] and '\n' not in bad[0], items
    r = subprocess.run([COVE, 'check', str(run_folder)], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and 'Traceback' not in r.stderr + r.stdout and why in r.stdout + r.stderr, r.stderr[-500:]
    hostile.refused()
