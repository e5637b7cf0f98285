"Package-level tests of `cove.store`: crash safety under `kill -9`, and reopening at HNSW scale."
import json, os, random, sqlite3, subprocess, sys, textwrap, time
from pathlib import Path
import numpy as np
import pytest
from cove.store import KnowledgeBase, Entry, MODES

DIM = 16
BATCH = 25  # entries per `insert_many` in the writer

# The writer inserts, bulk-inserts, revises, discards and records uses in a loop, and appends one
# line to a log file *after* each call returns (i.e. after the commit). Lines are flushed, so a line
# in the log is proof that its transaction committed.
WRITER = textwrap.dedent(f"""
    import sys, numpy as np
    from cove.store import KnowledgeBase, Entry
    path, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = np.random.default_rng(seed)
    def vec():
        v = rng.standard_normal({DIM}).astype('float32'); return v / np.linalg.norm(v)
    kb = KnowledgeBase(path, dim={DIM})
    ids = [e.id for e in kb.entries(status='online')]
    with open(log, 'a') as f:
        def note(*a): f.write(' '.join(map(str, a)) + '\\n'); f.flush()
        for i in range(10**6):
            r = rng.random()
            if r < 0.4 or len(ids) < 5:
                j = kb.insert(Entry(f'run {{seed}} entry {{i}} about tables rows and columns', 'memory', 'stable', embedding=vec()))
                ids.append(j); note('insert', j)
            elif r < 0.55:
                new = kb.insert_many([Entry(f'run {{seed}} batch {{i}} item {{b}} proofs and tactics', 'skill', 'strategic', embedding=vec())
                                      for b in range({BATCH})])
                ids += new; note('batch', f'{{seed}}-{{i}}', *new)
            elif r < 0.85:
                j = int(rng.choice(ids)); e = kb.revise(j, f'revised by run {{seed}} step {{i}}', reason='test', embedding=vec())
                note('revise', j, e.revisions)
            elif r < 0.92:
                j = int(rng.choice(ids)); kb.discard(j, reason='test'); ids.remove(j); note('discard', j)
            else:
                js = [int(x) for x in rng.choice(ids, 3, replace=False)]; kb.record_use(js, success=bool(rng.random() < .5)); note('use', *js)
""")


def _check(path:Path, log:Path):
    "The KB opens, is intact, holds every logged commit with its audit rows, and retrieves."
    con = sqlite3.connect(path)
    assert con.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    con.close()
    kb = KnowledgeBase(path, dim=DIM)
    rows = {e.id: e for e in kb.entries()}
    audit = kb.audit_log()
    ops = {}
    for a in audit: ops.setdefault(a['entry_id'], []).append(a['op'])
    # every entry in the table has exactly one insert audit row, and one revise row per revision
    for i, e in rows.items():
        assert ops[i].count('insert') == 1, (i, ops[i])
        assert ops[i].count('revise') == e.revisions, (i, ops[i], e.revisions)
        assert ops[i].count('use') == e.uses
        assert (e.status == 'discarded') == ('discarded' in ops[i])
    assert set(ops) == set(rows)  # no audit row without its entry
    # every commit the writer logged is in the database
    lines = [l.split() for l in log.read_text().splitlines() if l.strip()]
    for op, *args in lines:
        if op == 'insert': assert int(args[0]) in rows
        if op == 'batch': assert all(int(a) in rows for a in args[1:])
        if op == 'revise': assert rows[int(args[0])].revisions >= int(args[1])
        if op == 'discard': assert rows[int(args[0])].status == 'discarded'
    # a bulk insert is all or nothing, even when killed in the middle of it (grouped by inserted content)
    batches = {}
    for a in audit:
        if a['op'] == 'insert' and ' batch ' in a['after']['content']:
            b = a['after']['content'].split(' item ')[0]; batches[b] = batches.get(b, 0) + 1
    assert all(n == BATCH for n in batches.values()), batches
    # the indexes were rebuilt from SQLite and retrieval works in every mode
    online = [e for e in rows.values() if e.status == 'online']
    assert len(kb.dense) == len(online) > 0
    q = online[0]
    for mode in MODES:
        hits = kb.retrieve('tables rows proofs', k=3, mode=mode, query_vec=q.embedding)
        assert hits and all(h.entry.status == 'online' for h in hits)
    assert kb.retrieve(k=1, mode='dense', query_vec=q.embedding)[0].entry.id == q.id
    kb.close()
    return len(rows), len(lines)


def test_kill_never_corrupts(tmp_path):
    "Killing a writer with SIGKILL at random points never leaves the KB unreadable or inconsistent."
    path, log = tmp_path/'kb.sqlite', tmp_path/'log.txt'
    log.touch()
    rnd, env = random.Random(0), {**os.environ, 'PYTHONPATH': str(Path(__file__).parents[1])}
    n_rows = n_lines = 0
    for round in range(5):
        p = subprocess.Popen([sys.executable, '-c', WRITER, str(path), str(log), str(round)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        start = len(log.read_text().splitlines())
        t0 = time.time()
        while len(log.read_text().splitlines()) < start + 5:  # wait until it is writing
            assert p.poll() is None, p.stderr.read().decode()
            assert time.time() - t0 < 120, "writer never started writing"
            time.sleep(0.05)
        time.sleep(rnd.uniform(0.05, 1.5))
        p.kill(); p.wait()
        assert p.returncode == -9
        rows, lines = _check(path, log)
        print(f"round {round}: {rows} entries, {lines} committed calls")
        assert rows > n_rows and lines > n_lines  # each round committed more work
        n_rows, n_lines = rows, lines


def test_reopen_same_results_hnsw(tmp_path):
    "A KB past the HNSW threshold, with revisions and discards, retrieves the same after reopening."
    rng = np.random.default_rng(0)
    def unit(a): return (a / np.linalg.norm(a, axis=-1, keepdims=True)).astype(np.float32)
    words = 'table rows column filter count sum proof tactic entity bridge answer tool renamed'.split()
    V = unit(rng.standard_normal((400, DIM)))
    kb = KnowledgeBase(tmp_path/'kb.sqlite', dim=DIM, hnsw_threshold=300)
    ids = kb.insert_many([Entry(' '.join(rng.choice(words, 8)), 'memory', 'stable', embedding=v) for v in V])
    assert kb.dense.kind == 'hnsw'
    for i in ids[:20]: kb.discard(i, 'test')
    for i in ids[20:30]:
        kb.revise(i, 'revised ' + ' '.join(rng.choice(words, 5)), 'test', embedding=unit(rng.standard_normal(DIM)))
    Q = unit(rng.standard_normal((10, DIM)))
    qs = [' '.join(rng.choice(words, 3)) for _ in range(10)]
    before = [kb.search(q, 5, m, query_vec=v) for q, v in zip(qs, Q) for m in MODES]
    assert all(i not in ids[:20] for r in before for i, _ in r)
    kb.close()
    kb2 = KnowledgeBase(tmp_path/'kb.sqlite', dim=DIM, hnsw_threshold=300)
    assert kb2.dense.kind == 'hnsw' and len(kb2.dense) == 380
    after = [kb2.search(q, 5, m, query_vec=v) for q, v in zip(qs, Q) for m in MODES]
    assert [[i for i, _ in r] for r in after] == [[i for i, _ in r] for r in before]
    for a, b in zip(after, before): np.testing.assert_allclose([s for _, s in a], [s for _, s in b], rtol=1e-5)


def test_transaction_rolls_back(tmp_path):
    "A change that fails inside its transaction leaves neither the row nor an audit record."
    kb = KnowledgeBase(tmp_path/'kb.sqlite', dim=DIM)
    i = kb.insert(Entry('a lesson', 'memory', 'stable', embedding=np.ones(DIM, np.float32) / 4))
    n_audit = len(kb.audit_log())
    with pytest.raises(ValueError, match='successes'): kb.update(i, successes=3)  # more successes than uses
    with pytest.raises(KeyError): kb.record_use([i, 12345], success=True)  # the second id is missing
    assert kb.get(i).uses == 0 and len(kb.audit_log()) == n_audit
    kb.close()
