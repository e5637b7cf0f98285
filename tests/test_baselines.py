"""Peer baselines (`cove.evo_memory`, `cove.self_challenging`): Evo-Memory retrieval, Self-Challenging task parsing
and sandbox verification, and kill -9 resume of both methods."""
import json, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import numpy as np
import pytest
from cove.core import Task
from cove.evo_memory import ExperienceMemory
from cove.self_challenging import GeneratedTask, parse_generated, run_verification, validate_task

ROOT = Path(__file__).resolve().parents[1]
# `cove run` finds the methods through `cove.method.import_methods`; the runs shorten the challenger's replies
# (default self_challenging.max_new_tokens = 320, which would cost the random tiny model ~5 s per round) to keep this
# file fast.
LAUNCH = [sys.executable, '-c', 'import sys; from cove.cli import main; sys.exit(main(sys.argv[1:]))']
ENV = {**os.environ, 'OMP_NUM_THREADS': '1', 'HF_HUB_OFFLINE': '1'}

def _unit(*xs):
    v = np.array(xs, np.float32); return v / np.linalg.norm(v)

def test_evo_memory_retrieval_order_and_topk(tmp_path):
    "Hand-made experiences with hand-made keys: cosine order, top-k cap, the replay `limit`, and no double write."
    mem = ExperienceMemory(tmp_path/'m.sqlite', embedder=None)
    keys = {'a': _unit(1, 0, 0, 0), 'b': _unit(1, 1, 0, 0), 'c': _unit(0, 1, 0, 0), 'd': _unit(0, 0, 1, 0)}
    t = Task('t', 'math', 'test', 'q')
    ids = {k: mem.write(k, t, f'experience {k}', v) for k, v in keys.items()}
    assert mem.write('a', t, 'again', keys['a']) == ids['a'] and len(mem) == 4
    q = _unit(1, 0.2, 0, 0)   # cos: a 0.981, b 0.832, c 0.196, d 0
    hits = mem.retrieve([q], k=3)[0]
    assert [h.entry.source_task for h in hits] == ['a', 'b', 'c']
    assert np.allclose([h.score for h in hits], [1/np.sqrt(1.04), 1.2/np.sqrt(2*1.04), 0.2/np.sqrt(1.04)], atol=1e-5)
    assert [h.entry.content for h in mem.retrieve([q], k=1)[0]] == ['experience a']
    assert len(mem.retrieve([q], k=10)[0]) == 4 and mem.retrieve([q], k=0) == [[]]
    # a replay sees only its first play's memory
    assert [h.entry.source_task for h in mem.retrieve([q], k=3, limit=ids['a'])[0]] == ['a']
    assert [h.entry.source_task for h in mem.retrieve([_unit(0, 0, 1, 0)], k=1)[0]] == ['d']

GOOD = """<question>Lena buys 3 bags of 12 apples and eats 5 apples. How many apples are left?</question>
<verify>
def verify(answer):
    return float(answer) == 31
</verify>
<solution>31</solution>
<failure>36</failure>
<failure>41</failure>"""

def test_parse_generated_good_and_malformed():
    g, why = parse_generated('Sure!\n' + GOOD + '\nThanks.', 'math')
    assert why == 'ok' and g.question.startswith('Lena') and g.solution == '31' and g.failures == ['36', '41']
    assert parse_generated(GOOD.replace('<failure>36</failure>\n<failure>41</failure>', ''),
                           'math') == (None, 'no <failure> case')
    assert parse_generated(GOOD.replace('</verify>', ''), 'math') == (None, 'missing <verify>')
    assert parse_generated(GOOD.replace('return float(answer) == 31', 'return float(answer) ==='),
                           'math')[1].startswith('verify: SyntaxError')
    assert parse_generated(GOOD.replace('def verify', 'def check'), 'math') == (None, 'verify: no `def verify(...)`')
    assert parse_generated('random tokens ' * 40, 'tableqa') == (None, 'missing <question>')
    assert parse_generated(None, 'multihop') == (None, 'missing <question>')
    code = ("<question>Write double(x).</question><verify>\ndef check(candidate):\n    assert candidate(2) == 4\n"
            "</verify>"
            "<solution>\n```python\ndef double(x):\n    return 2 * x\n```\n</solution><failure>\ndef double(x):\n"
            "    return x\n</failure>")
    g, why = parse_generated(code, 'code')
    assert why == 'ok' and g.entry_point == 'double' and g.solution.startswith('def double')
    assert parse_generated(code.replace('<solution>\n```python\ndef double(x)', '<solution>\n```python\nlambda(x)'),
                           'code')[1] == 'solution: no function defined'

def test_sandbox_verification_accepts_example_rejects_failures():
    g = parse_generated(GOOD, 'math')[0]
    valid, why, checks = validate_task(g)
    assert (valid, why) == (True, 'ok') and [c['accepted'] for c in checks] == [True, False, False]
    assert run_verification(g, '31') == (True, 'accepted') and run_verification(g, None) == (False, 'no answer')
    assert validate_task(GeneratedTask('math', 'Q?', 'def verify(answer):\n    return answer != ""', '31',
                                       ['36']))[:2] == (False, 'failure case 1 accepted')
    assert validate_task(GeneratedTask('math', 'Q?', 'def verify(answer):\n    return answer == 31', '31',
                                       ['36']))[:2] == \
        (False, 'example solution not accepted: rejected (returned False)')   # compares a string with an int
    assert validate_task(GeneratedTask('math', 'Q?', 'def verify(answer):\n    raise SystemExit(0)', '31',
                                       ['36']))[0] is False
    c = GeneratedTask('code', 'double', 'def check(candidate):\n    assert candidate(2) == 4',
                      'def double(x):\n    return 2 * x',
                      ['def double(x):\n    return x', 'def double(x):\n    while True: pass'], entry_point='double')
    valid, why, checks = validate_task(c, timeout=1.0)
    assert (valid and [c['accepted'] for c in checks] == [True, False, False]
            and checks[2]['detail'].startswith('timeout'))

def _episodes(out):
    p = Path(out)/'episodes.jsonl'
    if not p.exists(): return []
    return [json.loads(l) for l in p.read_text().splitlines()[:-1] if l.strip()]   # the last line may be torn

def _state(path):
    try: return json.loads(Path(path).read_text()) if Path(path).exists() else {}
    except json.JSONDecodeError: return {}

def _kill_when(cmd, ready, timeout=150):
    p = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while time.time() < deadline and p.poll() is None and not ready(): time.sleep(0.02)
    assert p.poll() is None, 'the run finished before it could be killed'
    p.send_signal(signal.SIGKILL); p.wait()

def _run(cmd):
    r = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]

def _cmd(out, method, episodes, *sets):
    return LAUNCH + ['run', '--method', method, '--tasks', 'math,tableqa', '--episodes', str(episodes), '--model',
                     'tiny', '--set', 'model.batch_size=2', '--set', 'model.max_new_tokens=12', '--set',
                     'self_challenging.max_new_tokens=48', *[x for s in sets for x in ('--set', s)], '--out', str(out),
                     '--quiet']

def test_evo_memory_resume_after_kill(tmp_path):
    out, n = tmp_path/'run', 8
    cmd = _cmd(out, 'evo_memory', n // 2, 'evo_memory.k=2')
    _kill_when(cmd, lambda: len(_state(out/'evo_memory_state.json').get('applied', {})) >= 3)
    killed_at = len(_episodes(out))
    _run(cmd)
    eps = [json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines() if l.strip()]
    assert sorted(e['episode'] for e in eps) == list(range(n))                       # each episode exactly once
    con = sqlite3.connect(out/'memory.sqlite')
    assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    rows = con.execute('SELECT source_task FROM entries').fetchall()
    # one experience per episode: none lost, none twice
    assert len(rows) == n and len({r[0] for r in rows}) == n
    st = json.loads((out/'evo_memory_state.json').read_text())
    assert len(st['applied']) == n and sorted(a['entry'] for a in st['applied'].values()) == list(range(1, n + 1))
    assert sorted(e['memory_entry'] for e in eps) == list(range(1, n + 1))
    m = json.loads((out/'metrics.json').read_text())
    assert m['overall']['n'] == n and m['memory_size'] == n and m['summaries_policy'] + m['summaries_digest'] == n
    at_play = {k.split('#')[0]: a['memory_at_play'] for k, a in st['applied'].items()}
    # top-k of the memory as it was at play time
    assert all(len(e['retrieved']) == min(2, at_play[f"{e['family']}|{e['split']}|{e['task_id']}"]) for e in eps)
    assert all(max(e['retrieved'], default=0) <= at_play[f"{e['family']}|{e['split']}|{e['task_id']}"] for e in eps)
    print(f"killed after {killed_at} episodes; memory {m['memory_size']}, digests {m['digest_reasons']}")

def test_self_challenging_resume_after_kill(tmp_path):
    out, n = tmp_path/'run', 8
    cmd = _cmd(out, 'self_challenging', n // 2, 'self_challenging.every=2', 'self_challenging.tasks=2',
               'self_challenging.attempts=1', 'train.max_steps=1')
    sp = out/'self_challenging_state.json'
    _kill_when(cmd, lambda: bool(_state(sp).get('pending')) or len(_episodes(out)) >= 5)   # during a round if we can
    killed_at, was_pending = len(_episodes(out)), _state(sp).get('pending')
    _run(cmd)
    eps = [json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines() if l.strip()]
    assert sorted(e['episode'] for e in eps) == list(range(n))
    st = json.loads(sp.read_text())
    assert len(st['applied']) == n and st['family_episodes'] == {'math:embedded': n // 2, 'tableqa:embedded': n // 2}
    # every round exactly once
    assert [r['round'] for r in st['rounds']] == [1, 2, 3, 4] and st['pending'] == {} and st['next_round'] == 5
    assert sorted(e['round'] for e in eps if e['round']) == [1, 2, 3, 4]
    files = sorted(p.name for p in (out/'self_challenging').glob('round-*.json'))
    assert files == [f'round-{i:04d}.json' for i in range(1, 5)]
    m = json.loads((out/'metrics.json').read_text())
    assert (m['rounds'] == 4 and m['tasks_generated'] == 8 and m['tasks_generated'] == m['tasks_valid']
            + sum(m['invalid_reasons'].values()))
    assert m['parametric_updates'] == sum(1 for r in st['rounds'] if r['adapter']) and m['pending_rounds'] == 0
    for r in st['rounds']:
        rec = json.loads((out/'self_challenging'/r['file']).read_text())
        assert len(rec['generated']) == 2 and rec['update'] is not None
        if not r['adapter']: assert r['skipped'] in ('no valid generated task', 'no verified solution')
    print(f"killed after {killed_at} episodes, pending {was_pending}; rounds "
          f"{[(r['family'], r['valid'], r['skipped']) for r in st['rounds']]}")
