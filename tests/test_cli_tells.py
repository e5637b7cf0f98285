"""Issue 43, items 4-5 and the warnings of item 2: a CLI that tells (help with defaults on every option, `--version`,
`cove info` listing methods, families and plugins, "did you mean", hints in CLI terms), what the embedded model and
`model.dtype=auto` are, the library noise filtered in one place, and `make experiment-*` writing the notebook's HTML."""
import hashlib, json, os, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
COVE = str(Path(sys.executable).parent/'cove')
ENV = os.environ | {'OMP_NUM_THREADS': '1'}

def _cove(*argv, cwd=ROOT, env=None):
    return subprocess.run([COVE, *argv], cwd=cwd, capture_output=True, text=True, timeout=300, env=env or ENV)

def _one_line(r, *words):
    "`r` stopped with exit 2 and one line on stderr holding `words`."
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, (r.returncode, r.stderr[-1500:])
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]

def test_version():
    from cove import __version__
    r = _cove('--version')
    assert r.returncode == 0 and r.stdout.strip() == f'cove {__version__}', (r.stdout, r.stderr)

def test_every_option_has_help_with_its_default():
    import argparse
    from cove.cli import build_parser
    subs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(subs) == {'info', 'run', 'bench', 'demo', 'serve', 'check'}
    for cmd, p in subs.items():
        for a in p._actions:
            if isinstance(a, argparse._HelpAction): continue
            assert a.help, (cmd, a.option_strings)
            assert a.required or a.nargs == '+' or 'default' in a.help, (cmd, a.option_strings, a.help)

def test_run_help_lists_methods_and_families():
    r = _cove('run', '--help')
    assert r.returncode == 0, r.stderr
    out = ' '.join(r.stdout.split())   # argparse wraps the help to the terminal's width
    for text in ('--method METHOD a registered method', '--split SPLIT', '(default: test)',
                 "(default: the profile's, 0)", 'methods: always_both, base,', 'memrl', 'tableqa (embedded, wtq)',
                 'math (embedded, gsm8k, math)'):
        assert text in out, text

def test_info_lists_registries_model_and_dtype(tmp_path):
    (tmp_path/'tells_plugin.py').write_text('from cove.config import declare_key\n'
                                             "declare_key('tells.size', int, 2, 'a key of a plugin')\n")
    r = _cove('info', '--plugin', 'tells_plugin', env=ENV | {'PYTHONPATH': str(tmp_path)})
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {'base', 'cove', 'harness_only', 'memrl', 'evolver', 'oracle'} <= set(d['methods'])
    assert {'tableqa', 'multihop', 'math', 'code'} <= set(d['families']) and 'gsm8k' in d['families']['math']
    assert d['plugins'] == ['tells_plugin']
    assert 'Q4_1' in d['embedded_model'] and 'not those of the Hugging Face bf16' in d['embedded_model']
    assert d['dtype']['key'] == 'auto' and d['dtype']['here'] in ('float32', 'bfloat16')
    assert "torch_dtype='auto'" in d['dtype']['meaning'] and 'AVX512-BF16' in d['dtype']['meaning']

def test_did_you_mean(tmp_path):
    line = _one_line(_cove('info', '--set', 'trigger.windw=3'),
                     "unknown config key 'trigger.windw'; did you mean trigger.w")
    assert 'known keys' not in line and len(line) < 200, line   # the nearest keys, never all ~140
    line = _one_line(_cove('info', '--set', 'nosuch.key=1'), '`cove info --config` lists every key', '--plugin MODULE')
    assert 'model.name' not in line, line
    run = ['run', '--episodes', '1', '--quiet', '--out', str(tmp_path/'R')]
    _one_line(_cove(*run, '--method', 'harness-only', '--tasks', 'math'), "unknown method 'harness-only'; known: [",
              '; did you mean harness_only?')
    _one_line(_cove(*run, '--method', 'base', '--tasks', 'maths'), "unknown task family 'maths'", 'did you mean math?')
    _one_line(_cove(*run, '--method', 'base', '--tasks', 'tableqa:wtqq'),
              "unknown source 'wtqq' for tableqa; known: ['embedded', 'wtq']; did you mean wtq?")
    _one_line(_cove('demo', '--methods', 'base,cvoe', '--out', str(tmp_path/'D')), "did you mean cove")
    assert not (tmp_path/'R').exists() and not (tmp_path/'D').exists()

def test_download_hint_in_cli_terms(tmp_path):
    line = _one_line(_cove('run', '--method', 'base', '--tasks', 'math', '--episodes', '1', '--quiet',
                           '--model', 'nosuch-org/nosuch-model', '--out', str(tmp_path/'R')),
                     'not in the local Hugging Face cache')
    assert '--set model.allow_download=true' in line and 'allow_download=True' not in line, line

def test_no_library_noise_on_a_tiny_run(tmp_path):
    "A tiny EvolveR run whose cold-start SFT builds a LoRA adapter (where peft reads `is_gradient_checkpointing`)."
    r = _cove('run', '--model', 'tiny', '--method', 'evolver', '--tasks', 'math', '--episodes', '1', '--quiet',
              '--set', 'model.batch_size=1', '--set', 'model.max_new_tokens=4', '--set', 'evolver.max_turns=1',
              '--set', 'evolver.no_rl=true', '--set', 'evolver.prune_every=0', '--set', 'train.max_steps=1',
              '--set', 'train.reference_tasks=1', '--set', 'train.epochs=1', '--out', str(tmp_path/'R'))
    assert r.returncode == 0, r.stderr[-2000:]
    assert any((tmp_path/'R'/'adapters').iterdir())   # an update ran: the warning's path was taken
    assert 'FutureWarning' not in r.stderr and 'is_gradient_checkpointing' not in r.stderr, r.stderr[-2000:]
    assert 'Loading weights' not in r.stderr
    assert r.stderr == '', r.stderr[-2000:]   # --quiet: nothing but warnings and errors, and there were none

def test_quiet_libraries_drops_only_its_list():
    import warnings
    from cove.models import quiet_libraries, LIBRARY_NOISE
    assert all(why for _, _, why in LIBRARY_NOISE)   # each entry says why it is dropped
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter('always')
        quiet_libraries()
        warnings.warn('`is_gradient_checkpointing` is deprecated and will be removed in v6.', FutureWarning)
        warnings.warn('something else is deprecated', FutureWarning)
        warnings.warn('`is_gradient_checkpointing` as a DeprecationWarning', DeprecationWarning)
    assert [str(w.message) for w in seen] == ['something else is deprecated',
                                              '`is_gradient_checkpointing` as a DeprecationWarning']

def test_claim_verdict_three_cases():
    from cove.experiment import claim_verdict
    row = dict(method='cove', reference='base', n=4, a_rate=0.5, b_rate=0.5, diff=0.0, ci_lo=-0.49, ci_hi=0.49, p=1.0,
               a_only=0, b_only=0, mde=None)
    assert claim_verdict(row).startswith('inconclusive at n=4 (the interval includes 0; MDE n/a')
    assert 'MDE 0.300' in claim_verdict(row | {'a_only': 1, 'b_only': 1, 'mde': 0.3})
    assert claim_verdict(row | {'diff': 0.5, 'ci_lo': 0.1, 'ci_hi': 0.8}).startswith('holds (n=4)')
    assert claim_verdict(row | {'diff': -0.5, 'ci_lo': -0.8, 'ci_hi': -0.1}).startswith('contradicted (n=4)')

FAKE_PAPERMILL = '''#!/bin/sh
# papermill IN OUT -p out_dir DIR ...: an executed notebook, a table, and the exit status in $FAKE_STATUS
cat > "$2" <<'EOF'
{"cells": [{"cell_type": "markdown", "id": "a1", "metadata": {}, "source": ["# executed here"]}],
 "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
EOF
echo "| a |" > "$5/table.md"
exit ${FAKE_STATUS:-0}
'''

@pytest.mark.parametrize('status', [0, 1])
def test_make_experiment_writes_html(tmp_path, status):
    "`make experiment-NAME` (papermill faked) leaves NAME.html beside the executed notebook, also when a cell failed."
    venv = tmp_path/'venv'
    (venv/'bin').mkdir(parents=True)
    (venv/'bin'/'python').write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')   # this venv's python, its packages
    (venv/'bin'/'papermill').write_text(FAKE_PAPERMILL)
    for exe in ('python', 'papermill'): (venv/'bin'/exe).chmod(0o755)
    (venv/f".cove-installed-{hashlib.sha256(b'').hexdigest()[:16]}").touch()   # no pyproject.toml in tmp_path
    for d in ('tools', 'nbs'): (tmp_path/d).symlink_to(ROOT/d)   # the rule reads nbs/experiments/, tools/report.py
    r = subprocess.run(['make', '-s', '-f', str(ROOT/'Makefile'), f'VENV={venv}', 'experiment-calibration'],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=ENV | {'FAKE_STATUS': str(status)})
    assert (r.returncode == 0) == (status == 0), (r.stdout, r.stderr)
    html, = (tmp_path/'outputs'/'calibration').glob('*/calibration.html')
    assert 'executed here' in html.read_text()
    assert f'html: outputs/calibration/{html.parent.name}/calibration.html' in r.stdout
    assert ('| a |' in r.stdout) == (status == 0)
