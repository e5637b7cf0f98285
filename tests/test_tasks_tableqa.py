"""Package-level tests of the `tableqa` family: surfaces and renaming, call parsing, evaluators, reference replay, WTQ
loading."""
import json, random
from pathlib import Path
import pytest
from cove.core import Feedback
from cove.tasks.base import make_env, EpisodeState
from cove.tasks.surface import Surface, rename, parse_call, find_calls, with_surface
from cove.tasks.tableqa import (OPS, Table, default_surface, renamed_surface, run_call, EmbeddedTableQA, WTQTableQA,
    check_gold, replay, failure_kind, answers_match, wtq_match, wtq_normalize, to_value, to_value_list,
    check_denotation, tsv_unescape_list, FAILURE_KINDS)

TB = Table(['name', 'team', 'points', 'price'],
           [['Ana', 'Hawks', '31', '$1,200'], ['Bo', 'Owls', '12', '950'], ['Cy', 'Hawks', '20', 'n/a'],
            ['Dee', 'Pines', '7', '10.5']], 'players')
CANON_CALLS = [('columns', ''), ('select', '"name", "points"'), ('select', ''), ('filter_rows', 'points, >=, 12'),
               ('filter_rows', '"team", "hawks"'), ('count', '"team", "Hawks"'), ('count', ''), ('sum', '"points"'),
               ('sum', '"price", "team", "Hawks"'), ('argmax', '"points", "name"'),
               ('lookup', '"name", "Cy", "points"'),
               ('sql', '"SELECT name FROM t WHERE points > 10 ORDER BY points DESC"')]

@pytest.fixture(scope='module')
def env(): return EmbeddedTableQA()

# --- surfaces and renaming ---------------------------------------------------------------
@pytest.mark.parametrize('seed', range(25))
def test_rename_preserves_semantics_and_rejects_old_names(seed):
    s1 = default_surface(); s2 = rename(s1, seed); s3 = rename(s2, seed + 100)
    assert s2.version == 2 and s3.version == 3 and set(s2.names) == set(OPS) == set(s3.names)
    for s_old, s_new in [(s1, s2), (s2, s3)]:
        assert not set(s_new.names.values()) & (set(s_old.names.values()) | set(OPS))
        assert len(set(s_new.names.values())) == len(OPS)
        assert all(n.isidentifier() for n in s_new.names.values())
    for op, args in CANON_CALLS:
        a = run_call(TB, s1, f'{s1.name(op)}({args})'); b = run_call(TB, s2, f'{s2.name(op)}({args})')
        assert a.legal and b.legal and a.result == b.result and not a.result.startswith('Error'), (op, a, b)
        stale = run_call(TB, s2, f'{op}({args})')
        assert not stale.legal
        assert stale.result.startswith(f"Error: unknown tool '{op}' — available tools (surface v2): ")
        assert all(n in stale.result for n in s2.names.values())

def test_rename_deterministic_and_seed_dependent():
    s1 = default_surface()
    assert rename(s1, 3) == rename(s1, 3)
    assert len({tuple(sorted(rename(s1, k).names.items())) for k in range(20)}) > 10
    assert 'sql' not in rename(s1, 3, drop=('sql',)).names
    assert Surface.from_dict(json.loads(json.dumps(rename(s1, 3).to_dict()))) == rename(s1, 3)

def test_surface_doc_lists_exactly_the_current_tools():
    s2 = rename(default_surface(), 11)
    doc = s2.doc()
    assert doc.startswith('Tools (surface v2):') and len(doc.splitlines()) == 1 + len(OPS)
    for op, n in s2.names.items(): assert f'- {n}(' in doc and f'- {op}(' not in doc

def test_tool_results():
    s = default_surface()
    r = lambda c: run_call(TB, s, c).result
    assert r('count()') == '4' and r('count(team, hawks)') == '2'
    assert r('sum(price)') == '2160.5 (1 non-numeric cells skipped)'
    assert r('argmax(points, name)') == 'Ana' and r('lookup(name, Dee, team)') == 'Pines'
    assert r('filter_rows(points, "<", 10)').splitlines() == ['1 rows match', 'row | name | team | points | price',
                                                              '4 | Dee | Pines | 7 | 10.5']
    assert r('sql("SELECT count(*) FROM t WHERE team = \'Hawks\'")').splitlines()[1] == '1 | 2'

# --- call parsing ---------------------------------------------------------------------------
def test_parse_call_forms():
    assert parse_call('count("team", "Hawks")') == ('count', ['team', 'Hawks'], {})
    assert parse_call('count(team, Hawks)') == ('count', ['team', 'Hawks'], {})
    assert parse_call('count(city, New York)') == ('count', ['city', 'New York'], {})
    assert parse_call('filter_rows("points", ">", 15)') == ('filter_rows', ['points', '>', 15], {})
    assert parse_call('lookup(key_column="name", key="Bo", column="team")')[2] == dict(key_column='name', key='Bo',
                                                                                       column='team')
    assert find_calls('Thought: count them\nAction: count(team, Hawks)\nAction: columns()') == ['count(team, Hawks)',
                                                                                                'columns()']
    assert find_calls('```\ncount(team, Hawks)\n```') == ['count(team, Hawks)']

@pytest.mark.parametrize('action',
                         ['Action: count(', 'Action: count(team', 'Action: count)', 'Action: (((',
                          'Action: count(team))',
    'Action: lookup(1, 2, 3, 4, 5)', 'Action: count(**x)', 'Action: count(*x)', 'Action: sum(nope)', 'Action: sql(1)',
    'Action: sql("SELECT * FROM t; DROP TABLE t")',
                          'Action: sql("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) '
                          'FROM c")',
    'Action: filter_rows(points, "~", 3)', 'Action: argmax(team)', 'Action: select(1.5)', 'Action: count(lambda: 1, 2)',
    'Action: ' + '(' * 300, 'Action: count("' + 'a' * 10000 + '", 1)', 'Action: 123()', 'Action: __import__("os")', '',
                          '\n\n', 'Action:'])
def test_malformed_calls_give_visible_errors(env, action):
    t = env.tasks('same', 1)[0]
    st = env.reset(t)
    obs = env.step(st, action)
    assert isinstance(obs, str) and obs.startswith('Error'), obs
    assert st.answer is None and not st.done

def test_random_garbage_never_crashes(env):
    rng = random.Random(0); t = env.tasks('renamed', 1)[0]
    alphabet = 'abc_()[]{}"\',:=<>*\\ \n0123456789Action: Answer'
    for _ in range(500):
        st = env.reset(t)
        for _ in range(4):
            obs = env.step(st, ''.join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
            if obs is None or st.done: break
        fb = env.evaluate(st)
        assert isinstance(fb, Feedback) and failure_kind(st, fb) in FAILURE_KINDS

# --- evaluator ------------------------------------------------------------------------------
def test_evaluator_right_and_wrong(env):
    t = next(t for t in env.tasks('test', 12) if t.meta['qtype'] == 'count')
    s = env.surface(t); calls = env.reference(t)[:-1]
    st, fb = replay(env, t, calls + [f'Answer: {t.target}.0'])
    assert fb == Feedback('success', 1.0, 'correct') and failure_kind(st, fb) == 'success'
    st, fb = replay(env, t, calls + [f'Answer: {int(t.target) + 1}'])
    assert (fb.message == f"wrong answer: got '{int(t.target) + 1}', expected '{t.target}'"
            and failure_kind(st, fb) == 'right_api_wrong_answer')
    st, fb = replay(env, t, calls)
    assert (fb.status == 'failure' and fb.message.startswith("format: no 'Answer:' line")
            and failure_kind(st, fb) == 'format')
    st, fb = replay(env, t, [f'Answer: {int(t.target) + 1}'])
    assert not st.calls and fb.status == 'failure' and failure_kind(st, fb) == 'no_tool_call'
    rt = with_surface(t, rename(s, 5), split='renamed')
    st, fb = replay(env, rt, calls + [f'Answer: {int(t.target) + 1}'])
    assert st.api_correct is False and 'API error: unknown tool' in fb.message and '(surface v2)' in fb.message
    assert failure_kind(st, fb) == 'wrong_api'

def test_answers_match_normalisation():
    assert answers_match('3.0', '3') and answers_match('1,000', '1000') and answers_match('  VELMORA ', 'Velmora')
    assert answers_match('Arlo, Dalia', ['Dalia', 'Arlo']) and answers_match('Arlo|Dalia', ['Dalia', 'Arlo'])
    assert not answers_match('Arlo', ['Dalia', 'Arlo']) and not answers_match('3.5', '3') and not answers_match('', 'x')

# --- reference replay on every split --------------------------------------------------------
@pytest.mark.parametrize('split', ['train', 'test', 'same', 'renamed'])
def test_reference_replay_every_split(env, split):
    ts = env.tasks(split, 200, seed=0)
    acc, rej = check_gold(env, ts)
    assert (len(acc), rej) == (200, [])
    assert {t.meta['qtype'] for t in ts} == {'lookup', 'count', 'filter', 'argmax', 'sum', 'compare'}
    for t in ts[:20]:
        st, fb = replay(env, t, env.reference(t))
        assert st.api_correct is True and len(st.actions) <= env.max_turns
    json.dumps([t.to_dict() for t in ts])

def test_splits_same_and_renamed_pair_up(env):
    same, ren, test = env.tasks('same', 30, seed=2), env.tasks('renamed', 30, seed=2), env.tasks('test', 30, seed=2)
    assert [t.prompt for t in same] == [t.prompt for t in ren] == [t.prompt for t in test]
    assert all(t.payload['surface'] == default_surface().to_dict() for t in same)
    assert all(t.payload['surface'] == renamed_surface(2).to_dict() for t in ren)
    train_prompts = {t.prompt for t in env.tasks('train', 1000)}
    assert sum(t.prompt in train_prompts for t in test) <= 1

def test_make_env():
    e = make_env('tableqa')
    assert isinstance(e, EmbeddedTableQA) and e.max_turns == 4
    assert isinstance(make_env('tableqa:wtq'), WTQTableQA)

# --- WikiTableQuestions -----------------------------------------------------------------------
def test_wtq_normalisation_cases():
    assert wtq_match('1000', ['1,000']) and wtq_match('1,000', ['1000']) and wtq_match('1000.00', ['1,000'])
    assert not wtq_match('1001', ['1,000'])
    assert wtq_match('1990-01-02', ['January 2, 1990']) and wtq_match('2 January 1990', ['January 2, 1990'])
    assert not wtq_match('xx-01-02', ['January 2, 1990']) and wtq_match('xx-01-02', ['January 2'])
    assert wtq_match('1990', ['1990']) and wtq_match('march 1990', ['1990-03-xx'])
    assert (wtq_match('THE BEATLES', ['The Beatles']) and wtq_match('Beyonce', ['Beyoncé'])
            and wtq_match('Paris.', ['paris']))
    assert (wtq_match('Smith', ['Smith (footballer)']) and wtq_match('Smith', ['Smith [2]'])
            and wtq_match('Smith', ['"Smith"']))
    assert wtq_match('a|b', ['b', 'a']) and not wtq_match('a|b|c', ['b', 'a']) and not wtq_match('a', ['b', 'a'])
    assert wtq_match('a, b', ['b', 'a']) and wtq_match('Bangkok, Thailand', ['Bangkok, Thailand'])
    assert wtq_normalize('It’s – “ok”') == 'it\'s - "ok"'
    assert check_denotation(to_value_list(['2', '2.0']), to_value_list(['2']))
    assert to_value('2.50').match(to_value('2.5')) and not to_value('2').match(to_value('3'))
    assert tsv_unescape_list(r'x\py|z') == ['x|y', 'z']

def _fixture(tmp_path):
    root = tmp_path/'wtq'; (root/'csv'/'201-csv').mkdir(parents=True)
    (root/'csv'/'201-csv'/'5.csv').write_text('"Rank","Nation","Gold"\n"1","Norway","12"\n"2","Sweden","1,003"\n'
                                              '"3","Chile","7"\n')
    rows = ['id\tutterance\tcontext\ttargetValue',
            'nt-10\twhich nation won the most gold?\tcsv/201-csv/5.csv\tSweden',
            'nt-11\thow many golds did norway and chile win?\tcsv/201-csv/5.csv\t19',
            'nt-12\tbroken table\tcsv/201-csv/404.csv\tx',
            'nt-13\ttoo\tmany\tfields\there',
            'nt-14\tlist the top two\tcsv/201-csv/5.csv\tNorway|Sweden']
    (root/'random-split-1-dev.tsv').write_text('\n'.join(rows) + '\n')
    (root/'training.tsv').write_text('\n'.join(rows[:2]) + '\n')
    return root

def test_wtq_loader_fixture(tmp_path):
    root = _fixture(tmp_path)
    for d in (root, tmp_path):   # the wtq folder itself or its parent
        env = make_env('tableqa:wtq', data_dir=d)
        ts = env.tasks('test')
        assert [t.meta['wtq_id'] for t in ts] == ['nt-10', 'nt-11', 'nt-14']
        assert ((env.report.n_ok, env.report.n_bad) == (3, 2) and 'missing' in env.report.errors[0]
                and '5 fields' in env.report.errors[1])
    assert check_gold(env, ts) == ([t.id for t in ts], [])
    assert [t.id for t in env.tasks('train')] == ['wtq-train-nt-10']
    ren = env.tasks('renamed'); s = env.surface(ren[0])
    assert [t.prompt for t in ren] == [t.prompt for t in ts] and s == renamed_surface(0)
    st, fb = replay(env, ren[0], [f'Action: {s.name("argmax")}("Gold", "Nation")', 'Answer: sweden'])
    assert st.observations == [f'Result of {s.name("argmax")}: Sweden'] and fb.success and st.api_correct
    st, fb = replay(env, ren[1], ['Action: sum(Gold)', 'Answer: 1022'])
    assert not fb.success and st.api_correct is False and failure_kind(st, fb) == 'wrong_api'
    assert "expected '19'" in fb.message
    assert replay(env, ts[2], ['Answer: Sweden, Norway'])[1].success
    assert not make_env('tableqa:wtq', data_dir=tmp_path/'nope').available()[0]

def test_wtq_real_gold(capsys):
    env = WTQTableQA()
    ok, why = env.available()
    if not ok: pytest.skip(f'WikiTableQuestions data absent: {why}')
    ts = env.tasks('test', 500)
    assert len(ts) == 500 and env.report.n_bad == 0
    acc, rej = check_gold(env, ts)
    with capsys.disabled():
        print(f"\nWTQ dev gold check: {len(acc)}/{len(ts)} accepted; rejected: {rej[:20]}")
    assert len(acc) >= 0.99 * len(ts), rej
    # the tools run on real tables without errors
    s = env.surface(ts[0]); st = env.reset(ts[0])
    obs = env.step(st, f'Action: {s.name("columns")}()\nAction: {s.name("select")}()\nAction: {s.name("count")}()')
    assert 'Error' not in obs
    same, ren = env.tasks('same', 50), env.tasks('renamed', 50)
    assert [t.prompt for t in same] == [t.prompt for t in ren] == [t.prompt for t in ts[:50]]


# --- feedback after a rename -----------------------------------------------------------------
def test_old_name_gets_a_deprecation_notice_computed_by_the_environment(env):
    """After the rename an old name is answered as a real API would (the successor named); a name that never existed
    keeps the unknown-tool error; the previous surface is nowhere in the task."""
    from cove.tasks.surface import renames_in
    t = env.tasks('renamed', 1)[0]
    s, v1 = env.surface(t), default_surface()
    st = EpisodeState(t)
    obs = env.step(st, 'Action: count()\nAction: never_a_tool()')
    assert renames_in(obs) == {'count': s.name('count')}
    assert f"Error: tool 'count' was renamed to {s.name('count')!r} in surface v{s.version}; available tools" in obs
    assert "Error: unknown tool 'never_a_tool' — available tools" in obs
    assert [c.legal for c in st.calls] == [False, False]
    fb = env.evaluate(st)
    assert fb.kind == 'tool_error' and f"unknown tool 'count' (renamed to {s.name('count')!r}), 'never_a_tool'" in fb.message
    # the task carries the current surface only: no old name appears among its tool names
    assert not set(v1.names.values()) & set(s.names.values())
    assert set(t.payload) == {'table', 'surface', 'plan', 'qtype'} and set(t.payload['surface']) == {'version', 'names'}
    same = env.tasks('test', 1)[0]
    assert renames_in(env.step(EpisodeState(same), 'Action: tally()')) == {}   # v1 has no previous surface
