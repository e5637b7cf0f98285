"""No method reads the environment's rename map (issue 53, item 1).

What "the map" is here, the whole old -> new relation between `tableqa`'s tool surfaces:
- the environment's surface makers: `cove.tasks.surface.rename` when it yields a surface the environment issues,
  `tableqa.renamed_surface`, `tableqa.split_surface`, `tableqa.default_surface` (v1, what renamed surfaces derive from)
  and `tableqa._previous_surface`;
- canonical operation ids used across surfaces: the ids keying a task's `payload['surface']['names']` are the v1 names,
  so `new.names[op_of_old_name]` is the map itself. Here every renamed surface the environment issues keys its names by
  ids of its own (`count__v2`, same implementation), so ids no longer carry across surfaces, and asking a surface for an
  id it does not have but another surface has raises.

Each of these raises `PrivilegedRead` when the code reading it is not the environment's (`cove/tasks/`). The current
surface of a task (its tool names, documented in the prompt) stays readable: the agent sees it. Every registered method
then plays a few `tableqa` episodes across the drift with the tiny random Llama and no read may happen. The oracle
replays gold by design (`env.reference`, produced inside the environment on the task's current surface): it goes
through the same guards, so it too must never read the map."""
import json, sys
from dataclasses import replace
from pathlib import Path
import pytest
import cove.tasks.surface as S
import cove.tasks.tableqa as TQ
from cove.tasks.surface import Surface

ENV_DIR = str(Path(TQ.__file__).parent)   # the environment's own code
SKIP = {S.__file__, __file__}               # surface helpers and these guards: the reader is above them
READS: list = []                            # every privileged read attempted: (what, by which file)

class PrivilegedRead(Exception): "A method read the environment's rename map."

def _reader() -> str:
    "The file of the first frame above the guards and the surface helpers: who is reading."
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in SKIP: f = f.f_back
    return f.f_code.co_filename if f is not None else '?'

def _deny(what:str):
    "Raise (and record) unless the environment itself is reading."
    who = _reader()
    if who.startswith(ENV_DIR): return
    READS.append((what, who))
    raise PrivilegedRead(f'{who} read {what}')

def _salted(op:str, version:int) -> str: return op if version <= 1 else f'{op}__v{version}'

ALL_OPS: set = set()   # every canonical id of every surface (filled by the fixture)

class GuardedNames(dict):
    "A surface's op -> name map that raises when asked for another surface's canonical id."
    def _check(self, key):
        if key in ALL_OPS and not dict.__contains__(self, key): _deny(f'canonical id {key!r} of another surface')
    def __contains__(self, key):
        self._check(key)
        return dict.__contains__(self, key)
    def __getitem__(self, key):
        self._check(key)
        return dict.__getitem__(self, key)
    def get(self, key, default=None):
        self._check(key)
        return dict.get(self, key, default)

def _op_on(surface:Surface, op:str) -> str:
    "The id on `surface` of the operation with `op`'s implementation (the environment's own knowledge)."
    if dict.__contains__(surface.names, op): return op
    return next((o for o in surface.names if TQ.OPS.get(o) is TQ.OPS.get(op)), op)

def _salt_task(t):
    "`t` with its renamed surface (and plan) keyed by ids of that surface alone."
    s = t.payload.get('surface') if isinstance(t.payload, dict) else None
    if not s: return t
    v = int(s['version'])
    names = GuardedNames({_salted(op, v): n for op, n in s['names'].items()})
    plan = [[_salted(op, v), args] for op, args in t.payload.get('plan') or []]
    return replace(t, payload={**t.payload, 'surface': dict(version=v, names=names), 'plan': plan})

def _patch_everywhere(mp, orig, guard):
    "Replace `orig` by `guard` in every loaded cove module that bound it."
    for m in list(sys.modules.values()):
        if getattr(m, '__name__', '').startswith('cove') and m.__dict__.get(orig.__name__) is orig:
            mp.setattr(m, orig.__name__, guard)

@pytest.fixture
def hidden_map(monkeypatch):
    "The rename map unreadable to anything but the environment: each read raises `PrivilegedRead`."
    from cove.method import import_methods
    import_methods()
    READS.clear()
    env_renamed = {frozenset(TQ.renamed_surface(k).names.values()) for k in range(8)}
    for op in list(TQ.OPS):
        for v in range(2, 5):
            monkeypatch.setitem(TQ.OPS, _salted(op, v), TQ.OPS[op])
            monkeypatch.setitem(TQ.SYNONYMS, _salted(op, v), TQ.SYNONYMS[op])
    ALL_OPS.clear()
    ALL_OPS.update(TQ.OPS)
    o_rename, o_init, o_tasks, o_render = S.rename, Surface.__init__, TQ.EmbeddedTableQA.tasks, TQ.render_call

    def rename(surface, seed, drop=()):
        out = o_rename(surface, seed, drop)
        if frozenset(out.names.values()) in env_renamed: _deny("rename -> the environment's renamed surface")
        return out
    _patch_everywhere(monkeypatch, o_rename, rename)
    for name in ('renamed_surface', 'split_surface', 'default_surface', '_previous_surface'):
        f = getattr(TQ, name)
        def guard(*a, _f=f, **k):
            _deny(f'tableqa.{_f.__name__}')
            return _f(*a, **k)
        guard.__name__ = name
        _patch_everywhere(monkeypatch, f, guard)

    def init(self, *a, **k):
        o_init(self, *a, **k)
        self.names = GuardedNames(self.names)
    monkeypatch.setattr(Surface, '__init__', init)
    salted_tasks = lambda self, *a, **k: [_salt_task(t) for t in o_tasks(self, *a, **k)]
    monkeypatch.setattr(TQ.EmbeddedTableQA, 'tasks', salted_tasks)
    monkeypatch.setattr(TQ, 'render_call', lambda surface, op, args: o_render(surface, _op_on(surface, op), args))
    yield READS
    ALL_OPS.clear()

def test_the_guards_bite(hidden_map):
    "Each way of reading the map raises outside the environment; the environment itself still plays the drift."
    env = TQ.EmbeddedTableQA()
    old, new = env.tasks('test', 1)[0], env.tasks('renamed', 1)[0]
    s_old, s_new = S.surface_of(old), S.surface_of(new)       # each task's own surface: readable
    assert set(s_old.names.values()).isdisjoint(s_new.names.values())
    with pytest.raises(PrivilegedRead): TQ.renamed_surface(0)
    with pytest.raises(PrivilegedRead): TQ.split_surface('renamed', 0, None)
    with pytest.raises(PrivilegedRead): TQ.default_surface()
    with pytest.raises(PrivilegedRead): TQ._previous_surface(s_new)
    with pytest.raises(PrivilegedRead): S.rename(s_old, TQ.split_seed('renamed', 0))
    # the pattern of the removed CoveMethod.remap_volatile: old name -> canonical id -> the new surface's name
    op = s_old.canonical('count')
    with pytest.raises(PrivilegedRead): op in s_new.names
    with pytest.raises(PrivilegedRead): s_new.name(op)
    with pytest.raises(PrivilegedRead): new.payload['surface']['names'][op]
    assert S.rename(s_old, 12345).version == 2                 # a fresh rename (anti-recitation) is no read of the map
    n_denied = len(hidden_map)
    # the environment computes the deprecation notice and the gold replay on its own
    st = TQ.EpisodeState(new)
    got = S.renames_in(env.step(st, 'Action: count()'))
    assert list(got) == ['count'] and got['count'] in s_new.names.values() and not st.calls[0].legal
    assert env.reference(new)[-1].startswith('Answer:') and len(hidden_map) == n_denied == 8

def _run(method:str, out:Path) -> list[dict]:
    from cove.config import load_config
    from cove.llm import HFPolicy
    from cove.run import Run
    from cove.spec import RunSpec
    cfg = load_config(env={}, overrides={
        'model.name': 'tiny', 'model.batch_size': 2, 'model.max_new_tokens': 8, 'run.drift': 'tableqa@0.5:renamed',
        'trigger.N': 2, 'trigger.k': 2, 'trigger.w': 2, 'train.max_steps': 1, 'release.heldout': 1,
        'train.reference_tasks': 2, 'train.grpo_generations': 2, 'self_challenging.max_new_tokens': 16,
        'self_challenging.every': 2, 'self_challenging.tasks': 1, 'self_challenging.attempts': 1})
    Run(RunSpec(method, ['tableqa'], 4), cfg, out).execute(HFPolicy.load('tiny'), progress=False)
    return [json.loads(l) for l in (out/'episodes.jsonl').read_text().splitlines() if l.strip()]

def _methods() -> list[str]:
    from cove.method import import_methods
    from cove.registry import METHODS
    import_methods()
    return sorted(METHODS)

@pytest.mark.parametrize('method', _methods())
def test_every_method_plays_the_drift_without_the_map(hidden_map, method, tmp_path):
    """Every registered method runs episodes of `tableqa` across the rename with the map unreadable; no read attempted
    (`coevo_frozen` plays from the state a CoEvo-Mem run left, itself played under the guards)."""
    if method == 'coevo_frozen':
        from cove.coevo import freeze_checkpoint
        _run('coevo', tmp_path/'coevo')
        freeze_checkpoint(tmp_path/'coevo', tmp_path/method)
    eps = _run(method, tmp_path/method)
    assert [e['split'] for e in sorted(eps, key=lambda e: e['episode'])] == ['test', 'test', 'renamed', 'renamed']
    assert hidden_map == [], hidden_map
