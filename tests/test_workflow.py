"""COVE workflow (`cove.workflow`): a `cove run --method cove` killed with SIGKILL resumes with no lost or duplicated
episodes, a sound KB and its state."""
import json, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# `cove run` only knows methods registered on import; until the CLI imports cove.workflow, import it here first
LAUNCH = [sys.executable, '-c', 'import sys, cove.workflow; from cove.cli import main; sys.exit(main(sys.argv[1:]))']

def _cmd(out, method='cove', episodes=4):
    return LAUNCH + ['run', '--method', method, '--tasks', 'math,tableqa', '--episodes', str(episodes), '--model',
                     'tiny', '--set', 'trigger.N=2', '--set', 'trigger.k=2', '--set', 'trigger.w=2', '--set',
                     'model.batch_size=2', '--set', 'model.max_new_tokens=12', '--set', 'train.max_steps=2', '--set',
                     'release.heldout=2', '--out', str(out), '--quiet']

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.exists() else []

def _pending(out):
    p = Path(out)/'workflow_state.json'
    try: return json.loads(p.read_text()).get('pending') if p.exists() else {}
    except json.JSONDecodeError: return {}

def test_workflow_resume_after_kill(tmp_path):
    out, n = tmp_path/'run', 8
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'}
    p = subprocess.Popen(_cmd(out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # kill it during its first parametric update (state says `pending`), else after 5 episodes
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not _pending(out) and len(_episodes(out)) < 5:
        time.sleep(0.05)
    assert p.poll() is None, 'the run finished before it could be killed'
    p.send_signal(signal.SIGKILL); p.wait()
    killed_at, was_pending = len(_episodes(out)), _pending(out)
    assert killed_at < n
    r = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    eps = _episodes(out)
    assert sorted(e['episode'] for e in eps) == list(range(n))          # each episode exactly once
    for e in eps: assert {'channel', 'signals', 'trigger', 'update'} <= set(e)
    con = sqlite3.connect(out/'kb.sqlite')
    assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    assert con.execute('SELECT COUNT(*) FROM entries').fetchone()[0] > 0
    st = json.loads((out/'workflow_state.json').read_text())
    assert len(st['applied']) == n
    # each episode observed by the trigger once
    assert sum(f['episodes'] for f in st['trigger']['families'].values()) == n
    assert len(st['router']['log']) == n                                           # and routed once
    m = json.loads((out/'metrics.json').read_text())
    assert m['overall']['n'] == n and m['kb']['total'] > 0
    assert sum(m['trigger_events'].values()) + m['trigger_suppressed'] >= 1
    for u in st['updates']:
        if u.get('adapter'): assert (out/'adapters'/u['name']/'adapter_config.json').exists() and u['train_tokens'] > 0
    assert m['parametric_updates'] == sum(1 for e in eps if e['update'])
    assert st['pending'] == {}
    if was_pending:   # the interrupted update was redone on resume and credited to the episode that triggered it
        fam, key = next(iter(was_pending.items()))
        assert st['applied'][key]['update'] is not None, st['applied'][key]
    # finished: adds nothing
    r = subprocess.run(_cmd(out), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert len(_episodes(out)) == n
    m2 = json.loads((out/'metrics.json').read_text())
    assert (m2['parametric_updates'], m2['train_tokens'], m2['kb']) == (m['parametric_updates'], m['train_tokens'],
                                                                        m['kb'])
    print(f"killed after {killed_at} episodes, pending update {was_pending}; updates "
          f"{[(u['family'], u.get('name')) for u in st['updates']]}")

def _run_in_process(out, algo, families):
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.run import Run, RunSpec
    cfg = load_config(env={}, overrides={'model.name': 'tiny', 'trigger.N': 2, 'trigger.k': 2, 'trigger.w': 2,
                                         'model.batch_size': 2, 'model.max_new_tokens': 12, 'train.max_steps': 1,
                                         'release.heldout': 1, 'train.algo': algo, 'train.reference_tasks': 2,
                                         'train.grpo_generations': 2})
    m = Run(RunSpec('always_both', families, 2), cfg, out).execute(HFPolicy.load('tiny'), progress=False)
    return m, json.loads((Path(out)/'workflow_state.json').read_text())

def test_workflow_grpo_update_with_anti_recitation(tmp_path):
    """train.algo=grpo: the triggered update is a GRPO LoRA on memory-aware, renamed tableqa prompts, hot-swapped and
    counted."""
    m, st = _run_in_process(tmp_path/'grpo', 'grpo', ['tableqa'])
    done = [u for u in st['updates'] if u.get('adapter')]
    assert done and all(u['algo'] == 'grpo' and u['train_tokens'] > 0 for u in done), st['updates']
    assert m['kpo']['renamed'] >= 2            # each GRPO prompt renamed for its episode
    assert m['parametric_updates'] == len(done)

def test_workflow_sft_renames_volatile_names(tmp_path):
    "With KnowledgePO, the SFT update's reference conversations are renamed per episode (anti-recitation)."
    m, st = _run_in_process(tmp_path/'sft', 'sft', ['tableqa'])
    done = [u for u in st['updates'] if u.get('adapter')]
    assert done and all(u['algo'] == 'sft' for u in done)
    assert m['kpo']['renamed'] >= 2

def test_workflow_grpo_trains_on_routed_rollouts(tmp_path, monkeypatch):
    """Issue 11 item 7: GRPO prompts are the turns of the routed rollouts (injected entries and all), not only reference
    first turns."""
    import cove.workflow
    seen, real = [], cove.workflow.train_grpo
    def spy(policy, prompts, reward, *a, **kw): seen.append(prompts); return real(policy, prompts, reward, *a, **kw)
    monkeypatch.setattr(cove.workflow, 'train_grpo', spy)   # the name COVE's update calls
    m, st = _run_in_process(tmp_path/'grpo', 'grpo', ['tableqa'])
    assert seen, st['updates']
    ids = [tid for ds in seen for tid in ds['task_id']]
    rollout = [i for i, tid in enumerate(seen[0]['task_id']) if '#rollout' in tid]
    # today's code trained on '#reference' (first-turn) prompts only
    assert rollout, ids
    assert sum('#reference' in t for t in seen[0]['task_id']) == 2
    p = seen[0]['prompt'][rollout[0]]
    # the history before an assistant turn of a played episode
    assert p[0]['role'] == 'system' and p[-1]['role'] == 'user'
    # rollouts renamed for their episode, as the references are
    assert m['kpo']['renamed'] >= 3
