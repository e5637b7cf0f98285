"""Issue 55, mixing: a resume is bound to everything that decides its results. A data file a family reads as it plays
(a WikiTableQuestions table) edited between a kill and the resume, and the plugins a run was made with, are part of
what it is: a difference is refused in one line, and `cove check` flags it."""
import json, os, shutil, subprocess, sys
from pathlib import Path
import pytest
from cove.check import check_run
from cove.config import load_config
from cove.run import Run
from cove.spec import RunSpec

WTQ = Path(__file__).resolve().parents[1]/'..'/'shared'/'datasets'/'wtq'
COVE = str(Path(sys.executable).parent/'cove')

def _small_wtq(root:Path, n:int=4) -> Path:
    "A WikiTableQuestions folder of `n` questions of each split and the tables they read, copied from the real one."
    dst = root/'wtq'
    for f in ('random-split-1-dev.tsv', 'training.tsv'):
        lines = (WTQ/f).read_text().splitlines()[:n + 1]
        (dst/f).parent.mkdir(parents=True, exist_ok=True)
        (dst/f).write_text('\n'.join(lines) + '\n')
        for l in lines[1:]:
            t = l.split('\t')[2]
            (dst/t).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(WTQ/t, dst/t)
    return dst

@pytest.mark.skipif(not (WTQ/'random-split-1-dev.tsv').exists(), reason='no WikiTableQuestions in ../shared/datasets')
def test_a_table_edited_between_kill_and_resume_is_refused(tmp_path, hostile):
    wtq = _small_wtq(tmp_path/'data')
    cfg = load_config(env={}, overrides={'data.dir': str(tmp_path/'data')})
    spec, out = RunSpec('oracle', ['tableqa:wtq'], 2), tmp_path/'run'
    Run(spec, cfg, out).execute(progress=False)
    eps = (out/'episodes.jsonl').read_text().splitlines()
    (out/'episodes.jsonl').write_text(eps[0] + '\n')   # killed after its first episode
    (out/'metrics.json').unlink()
    table = wtq/(wtq/'random-split-1-dev.tsv').read_text().splitlines()[2].split('\t')[2]   # the 2nd question's
    table.write_text(table.read_text().replace('\n', '\n', 1) + 'x,y\n')   # edited: the same task id, other data
    with pytest.raises(ValueError, match='data: the data it plays changed') as e:
        Run(spec, cfg, out)
    assert '\n' not in str(e.value)
    assert len((out/'episodes.jsonl').read_text().splitlines()) == 1   # nothing played
    bad = [(i, why) for i, ok, why in check_run(out) if not ok]
    assert any('the data it plays changed' in why for _, why in bad), bad
    hostile.refused()
    hostile.mixed(0)

def test_a_resume_without_the_plugin_the_run_was_made_with_is_refused(tmp_path, hostile):
    "A run made with a (grading) plugin, killed, resumed without it: refused in one line, flagged by `cove check`."
    (tmp_path/'gradeplug.py').write_text('"A grading plugin: it is loaded, and so part of what the run is."\n')
    out = tmp_path/'run'
    base = [COVE, 'run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--out', str(out), '--quiet']
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get('PYTHONPATH')])))
    r = subprocess.run(base + ['--plugin', 'gradeplug'], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-500:]
    assert json.loads((out/'config.json').read_text())['plugins'] == ['gradeplug']
    eps = (out/'episodes.jsonl').read_text().splitlines()
    (out/'episodes.jsonl').write_text(eps[0] + '\n')   # killed after its first episode
    (out/'metrics.json').unlink()
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, env=env)   # resumed without the plugin
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'gradeplug' in lines[0] and 'Traceback' not in r.stderr, r.stderr
    assert len((out/'episodes.jsonl').read_text().splitlines()) == 1   # nothing graded the other way
    bad = [(i, why) for i, ok, why in check_run(out) if not ok]
    assert any(i == 'plugins' and 'gradeplug' in why for i, why in bad), bad
    hostile.refused()
    hostile.mixed(int(r.returncode == 0))

def test_a_resume_with_the_plugin_edited_is_refused(tmp_path, hostile):
    "The plugin's version and source digest are recorded: edited between a kill and the resume, it is refused."
    plug = tmp_path/'gradeplug2.py'
    plug.write_text('"A grading plugin."\nVERSION = 1\n')
    out = tmp_path/'run'
    base = [COVE, 'run', '--method', 'oracle', '--tasks', 'math', '--episodes', '2', '--out', str(out), '--quiet',
            '--plugin', 'gradeplug2']
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get('PYTHONPATH')])))
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-500:]
    assert 'gradeplug2' in json.loads((out/'config.json').read_text())['plugin_versions']
    eps = (out/'episodes.jsonl').read_text().splitlines()
    (out/'episodes.jsonl').write_text(eps[0] + '\n')   # killed after its first episode
    (out/'metrics.json').unlink()
    plug.write_text('"A grading plugin, graded another way now."\nVERSION = 2\n')
    r = subprocess.run(base, capture_output=True, text=True, timeout=300, env=env)
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and 'gradeplug2' in lines[0] and 'Traceback' not in r.stderr, r.stderr
    assert len((out/'episodes.jsonl').read_text().splitlines()) == 1
    hostile.refused()
    hostile.mixed(int(r.returncode == 0))

def test_the_same_plugin_source_loaded_two_ways_is_not_a_difference(monkeypatch):
    "A run made with the plugin installed (a distribution version) and checked with the module alone: the same source."
    import cove.check as chk
    old = dict(plugins=['p'], plugin_versions={'p': '0.1 sha256:ab12'})
    monkeypatch.setattr(chk, 'plugin_versions', lambda names=None: {n: 'sha256:ab12' for n in names})
    assert chk.plugins_diff(old, now=['p']) == []
    monkeypatch.setattr(chk, 'plugin_versions', lambda names=None: {n: '0.1 sha256:cd34' for n in names})
    assert chk.plugins_diff(old, now=['p']) == ['plugin p: 0.1 sha256:ab12 -> 0.1 sha256:cd34']
