"""Issue 54 item 2: the demo's methods play at once through one batching engine (`cove.batching`), each learning
between its own episodes. On the tiny random Llama in fp32 the concurrent demo gives every method the same
episodes, transcripts and training tokens as the sequential one, in one process or dealt to worker processes
(`run.workers`); a run that fails fails alone, never a hang; a demo killed with SIGKILL leaves no worker behind."""
import json, signal, subprocess, sys, threading, time
from pathlib import Path
import pytest
from cove.core import read_jsonl
from cove.demo import run_demo, demo_config
from cove.batching import BatchEngine, play_streams
from cove.llm import HFPolicy, tiny_llama

SETS = {'model.name': 'tiny', 'model.dtype': 'float32', 'trigger.k': 2, 'model.batch_size': 16,
        'model.max_new_tokens': 12, 'release.heldout': 1}
METHODS, FAMILIES = ['base', 'parametric_only', 'cove'], ['math', 'tableqa']

def _demo(out, streams:int, continuous:bool=False, workers:int=1):
    cfg = demo_config(sets={**SETS, 'run.streams': streams, 'run.stream_wait': 2.0, 'run.continuous': continuous,
                            'run.workers': workers, 'run.threads': 1}, env={}, episodes=2)
    return run_demo(cfg, out, episodes=2, methods=METHODS, families=FAMILIES, progress=False, engine='hf')

def _played(d, meth):
    "Each episode's task, status and assistant turns, in episode order."
    recs = sorted(read_jsonl(d/meth/'episodes.jsonl'), key=lambda r: r['episode'])
    return [(r['episode'], r['task_id'], r['status'],
             [m['content'] for m in r.get('trace') or [] if m.get('role') == 'assistant']) for r in recs]

@pytest.fixture(scope='module')
def demos(tmp_path_factory):
    d = tmp_path_factory.mktemp('streams')
    return {**{s: (d/f's{s}', _demo(d/f's{s}', s)) for s in (1, 0)}, 'continuous': (d/'c', _demo(d/'c', 0, True))}

def test_concurrent_demo_plays_as_the_sequential_one(demos):
    (d1, s1), (d0, s0) = demos[1], demos[0]
    assert (s1['streams'], s0['streams']) == (1, len(METHODS))
    for meth in METHODS: assert _played(d0, meth) == _played(d1, meth), meth
    keys = ('method', 'overall', 'episodes', 'prompt_tokens', 'train_tokens', 'updates', 'trigger_events')
    assert [{k: r[k] for k in keys} for r in s0['rows']] == [{k: r[k] for k in keys} for r in s1['rows']]
    assert {r['method']: r['train_tokens'] > 0 for r in s0['rows']}['parametric_only']   # it learnt while others played
    assert json.loads((d0/'summary.json').read_text())['streams'] == len(METHODS)

def test_the_continuous_decoder_plays_the_demo_as_the_sequential_one(demos):
    "`run.continuous=true`: fp32 rows joining and leaving between tokens give every run the sequential transcripts."
    (d1, s1), (dc, sc) = demos[1], demos['continuous']
    for meth in METHODS: assert _played(dc, meth) == _played(d1, meth), meth
    keys = ('method', 'overall', 'episodes', 'prompt_tokens', 'train_tokens', 'updates', 'trigger_events')
    assert [{k: r[k] for k in keys} for r in sc['rows']] == [{k: r[k] for k in keys} for r in s1['rows']]

def test_a_failing_stream_fails_alone_and_nothing_hangs():
    pol = HFPolicy(*tiny_llama(), batch_size=8, name='tiny')
    def train_then_fail(p):
        p.model   # takes the training turn (as a trainer's copy does), then fails holding it
        raise RuntimeError('trainer broke')
    def waits_for_the_turn(p):
        return type(p.model).__name__   # only gets it once the failed stream has given it back
    res = play_streams(pol, {'bad': train_then_fail, 'next': waits_for_the_turn,
                             'ok': lambda p: p.generate(['Say hi.'], max_new_tokens=3)[0].completion_tokens},
                       wait=1.0)
    assert isinstance(res['bad'], RuntimeError) and res['next'] == 'LlamaForCausalLM' and res['ok'] > 0
    assert not [t.name for t in threading.enumerate() if t.name.startswith('cove-')]   # the engine's and streams' ended

def test_the_engine_refuses_a_policy_it_cannot_batch():
    with pytest.raises(TypeError, match='runs an HFPolicy'): BatchEngine(object())

def test_streams_reaching_their_first_update_together_import_trl(tmp_path):
    "Six threads' first import of TRL at once (a fresh process): each gets its class (a bare `from trl import` fails)."
    import subprocess, sys
    code = '''import threading
from cove.train import trl_names
errs = []
def first_update():
    try: trl_names('SFTConfig', 'GRPOTrainer')
    except Exception as e: errs.append(repr(e))
ths = [threading.Thread(target=first_update) for _ in range(6)]
for t in ths: t.start()
for t in ths: t.join()
print('errors', errs)
'''
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=600,
                       env={**__import__('os').environ, 'OMP_NUM_THREADS': '1'})
    assert r.returncode == 0 and 'errors []' in r.stdout, (r.stdout[-500:], r.stderr[-1500:])

def test_a_run_notes_only_the_files_its_own_thread_reads(tmp_path):
    """While one run draws its tasks (noting the files its families read, bound into its data digest), a file another
    run's thread opens is not its: else the digest depends on what else played meanwhile, and a resume is refused."""
    import threading
    from cove.spec import _noting, _SEEN
    other = tmp_path/'other-run-state.json'
    other.write_text('{}')
    started, done = threading.Event(), threading.Event()
    def other_run():
        started.wait(10)
        other.read_text()
        done.set()
    th = threading.Thread(target=other_run)
    th.start()
    env = type('Env', (), {'data_dir': None})()
    with _noting('family-drawn-here', env):
        started.set()
        assert done.wait(10)
    th.join()
    assert str(other) not in _SEEN[('family-drawn-here', 'None')]

def test_closing_the_engine_while_it_waits_for_other_streams(monkeypatch):
    "`close` while the engine waits for the other live streams: the pending request fails, the thread ends at once."
    crashed = []
    monkeypatch.setattr(threading, 'excepthook', lambda a: crashed.append(a.exc_type))
    eng = BatchEngine(HFPolicy(*tiny_llama(), batch_size=8, name='tiny'), wait=30.0)
    a, b = eng.stream('a'), eng.stream('b')   # b never asks: the engine waits up to 30 s for it
    out = {}
    t = threading.Thread(target=lambda: out.update(r=_try(lambda: a.generate(['Say hi.'], max_new_tokens=3))))
    t.start()
    while not eng.pending: threading.Event().wait(0.01)
    t0 = time.monotonic()
    eng.close()
    t.join(5)
    assert time.monotonic() - t0 < 5 and not eng.worker.is_alive() and not crashed
    assert isinstance(out['r'], RuntimeError) and 'closed' in str(out['r'])

def _try(f):
    try: return f()
    except Exception as e: return e

def test_workers_play_the_demo_as_one_process(demos, tmp_path):
    "`run.workers=2`: two processes of one thread, each with its own model and engine, give the sequential tables."
    (d1, s1), d2 = demos[1], tmp_path/'w2'
    s2 = _demo(d2, 0, workers=2)
    assert (s1['workers'], s2['workers'], s2['threads']) == (1, 2, 1)
    for meth in METHODS: assert _played(d2, meth) == _played(d1, meth), meth
    keys = ('method', 'overall', 'episodes', 'prompt_tokens', 'train_tokens', 'updates', 'trigger_events')
    assert [{k: r[k] for k in keys} for r in s2['rows']] == [{k: r[k] for k in keys} for r in s1['rows']]
    assert 'in 2 processes of 1 torch thread' in (d2/'table.md').read_text()
    log = (d2/'demo.log').read_text()   # both workers wrote to the demo's log
    assert log.count('torch threads: 1') == 2 and all(f'{m} (seed 0): success' in log for m in METHODS), log

def _children(pid:int) -> list[int]:
    "The pids whose parent is `pid` (from /proc)."
    out = []
    for p in Path('/proc').iterdir():
        try: st = (p/'status').read_text()
        except (OSError, ValueError): continue
        if p.name.isdigit() and f'\nPPid:\t{pid}\n' in st: out.append(int(p.name))
    return out

def _alive(pid:int) -> bool:
    try: return 'State:\tZ' not in Path(f'/proc/{pid}/status').read_text()
    except OSError: return False

@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='reads /proc (Linux)')
def test_a_killed_demo_leaves_no_worker(tmp_path):
    sets = [a for k, v in {**SETS, 'run.workers': 2, 'run.threads': 1, 'model.max_new_tokens': 64}.items() for a in ('--set', f'{k}={v}')]
    demo = subprocess.Popen([sys.executable, '-c', 'from cove.cli import main; main()', 'demo', '--out', str(tmp_path/'d'), '--engine', 'hf',
                             '--episodes', '50', '--families', 'math', *sets],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        t = time.time()
        while time.time() - t < 120 and not any('torch threads' in p.read_text() for p in tmp_path.glob('d/demo.log')):
            assert demo.poll() is None, 'the demo ended before its workers started'
            time.sleep(0.5)
        workers = [p for p in _children(demo.pid) if 'spawn_main' in Path(f'/proc/{p}/cmdline').read_text()]
        assert len(workers) == 2, workers
    finally: demo.send_signal(signal.SIGKILL)
    demo.wait()
    t = time.time()
    while time.time() - t < 30 and any(map(_alive, workers)): time.sleep(0.2)
    assert not [p for p in workers if _alive(p)], 'a worker outlived the killed demo'
