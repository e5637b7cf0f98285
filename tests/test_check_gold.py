"""check_gold replays alone what parallel replay cannot judge: timeouts, and CPython 3.11's AST race (gh-106905)."""
import threading
from cove.core import Feedback, Task
from cove.tasks.base import AST_RACE, FAMILIES, Environment, check_gold, register_env


def test_the_ast_race_is_replayed_alone_and_logged(caplog):
    calls, lock = {}, threading.Lock()

    @register_env('race_once')
    class RaceOnce(Environment):
        "The first evaluation of each task raises the error CPython 3.11 raises when two threads build ASTs at once."
        def tasks(self, split='train', n=None, seed=0):
            return [Task(f'r-{i}', 'race_once', split, f'What is {i}?', target=str(i)) for i in range(n or 4)]
        def instructions(self, task): return 'Reply with `Answer: <number>`.'
        def evaluate(self, state):
            with lock: calls[state.task.id] = calls.get(state.task.id, 0) + 1
            if calls[state.task.id] == 1: raise SystemError(f"{AST_RACE} (before=102, after=37)")
            ok = state.answer == state.task.target
            return Feedback('success' if ok else 'failure', float(ok), 'correct' if ok else 'wrong')
        def reference(self, task): return [f'Answer: {task.target}']
    try:
        env = RaceOnce()
        acc, rej = check_gold(env, env.tasks('train', 4), workers=2)
        assert (acc, rej) == (['r-0', 'r-1', 'r-2', 'r-3'], [])
        assert calls == {f'r-{i}': 2 for i in range(4)}
        assert sum('replayed alone' in r.getMessage() for r in caplog.records) == 4
    finally: del FAMILIES['race_once']


def test_other_evaluator_errors_stay_rejections():
    @register_env('always_err')
    class AlwaysErr(Environment):
        def tasks(self, split='train', n=None, seed=0): return [Task('e-0', 'always_err', split, 'q', target='1')]
        def instructions(self, task): return ''
        def evaluate(self, state): raise RuntimeError('the checker broke')
        def reference(self, task): return ['Answer: 1']
    try:
        env = AlwaysErr()
        acc, rej = check_gold(env, env.tasks(), workers=2)
        assert acc == [] and rej[0][0] == 'e-0' and 'the checker broke' in rej[0][1]
    finally: del FAMILIES['always_err']
