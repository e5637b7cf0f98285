"""Router properties that need fresh processes: light imports, and Random-Route decisions that do not depend on the
process's hash seed."""
import os, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def _py(code:str, **env) -> str:
    r = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip()

def test_router_and_trigger_import_without_torch():
    out = _py("import sys, cove.router, cove.trigger; print('torch' in sys.modules, 'transformers' in sys.modules)")
    assert out == 'False False'

ROUTES = ("from cove.router import RandomRoute; from cove.core import Task, Feedback\n"
          "r = RandomRoute(p=0.5, seed=11)\n"
          "print(''.join('P' if r.decide(Task(f't{i}', 'math', 'train', ''), Feedback('failure', 0.0)).parametric else "
          "'H' for i in range(64)))")

def test_random_route_is_stable_across_processes():
    a, b = _py(ROUTES, PYTHONHASHSEED='1'), _py(ROUTES, PYTHONHASHSEED='2')
    assert a == b and len(a) == 64 and 16 < a.count('P') < 48

def test_router_state_resumes_from_jsonl_log(tmp_path):
    "A router's decision log written as JSON lines is enough to rebuild its shares and family history after a kill."
    from cove.core import Task, Feedback, read_jsonl
    from cove.router import RandomRoute
    r = RandomRoute(p=0.5, seed=0, log_path=tmp_path/'router.jsonl')
    for i in range(30):
        r.decide(Task(f't{i}', 'math' if i % 3 else 'code', 'train', ''),
                 Feedback('success' if i % 2 else 'failure', float(i % 2)))
    back = RandomRoute(p=0.5, seed=0).load_state_dict({'name': 'random_route',
                                                       'log': read_jsonl(tmp_path/'router.jsonl'),
                                                       'stats': dict(r.stats)})
    assert back.shares() == r.shares() and back.family_history('math') == r.family_history('math')

def test_routing_cases_and_zero_shot_template_stay_light():
    """Thirty hand-labelled routing cases, ten per channel; the zero-shot template needs no torch (few-shot imports the
    judge only when used)."""
    out = _py("import sys; from collections import Counter; from cove.router import route_template, ROUTE_TEMPLATE, "
              "ROUTING_CASES\n"
              "assert route_template(0) == ROUTE_TEMPLATE\n"
              "print(len(ROUTING_CASES), sorted(Counter(c['gold'] for c in ROUTING_CASES).values()), 'torch' in "
              "sys.modules)")
    assert out == '30 [10, 10, 10] False'


def _feedback_stream(router, family, kinds):
    "Route one episode of `family` per kind (`ok` a success); the decisions."
    from cove.core import Task, Feedback
    fb = lambda k: Feedback('success', 1.0, 'correct') if k == 'ok' else Feedback('failure', 0.0, k, k)
    return [router.decide(Task(f'{family}-{i}', family, 'train', 'q'), fb(k)) for i, k in enumerate(kinds)]

def test_feedback_router_reads_the_family_window():
    "Issue 40: tool errors -> harness; recurring wrong answers at flat success -> parametric; both -> hybrid."
    from cove.router import FeedbackRouter
    r = FeedbackRouter()   # window 8, harness_share 0.25, param_share 0.5, flat_eps 0.05, min_episodes 4
    tools = _feedback_stream(r, 'tableqa', ['ok', 'tool_error'] * 4)
    wrong = _feedback_stream(r, 'math', ['wrong_answer', 'wrong_answer', 'ok', 'wrong_answer'] * 2)
    both = _feedback_stream(r, 'multihop', ['tool_error', 'wrong_answer', 'wrong_answer', 'format'] * 2)
    assert [d.channel for d in tools[:3]] == ['harness_only'] * 3            # before min_episodes
    last = (tools[-1].channel, wrong[-1].channel, both[-1].channel)
    assert last == ('harness_only', 'parametric_candidate', 'hybrid')
    assert both[-1].source == 'feedback' and 'tool_error 2/8' in both[-1].signals
    assert both[-1].reason.endswith('hybrid.')
    rising = _feedback_stream(FeedbackRouter(), 'code', ['wrong_answer'] * 5 + ['ok'] * 3)
    assert rising[-1].channel == 'harness_only'                            # memory is fixing it: no parametric signal
    late = _feedback_stream(FeedbackRouter(), 'code', ['timeout'] * 6 + ['ok'] * 2)
    assert late[-1].channel == 'harness_only' and late[-1].scores['task_error'] == 0.0   # timeouts are left out

def test_feedback_router_depends_on_feedback_only():
    "No judge, no policy, no adapter: the same feedback sequence gives identical decisions, signals and reasons."
    from cove.router import FeedbackRouter, make_router
    seq = ['tool_error', 'wrong_answer', 'ok', 'format', 'tool_error', 'wrong_answer', 'timeout', 'wrong_answer'] * 2
    a = [d.to_dict() for d in _feedback_stream(make_router('feedback'), 'tableqa', seq)]
    b = [d.to_dict() for d in _feedback_stream(FeedbackRouter(), 'tableqa', seq)]
    assert a == b and {d['channel'] for d in a} >= {'harness_only', 'hybrid'}
    assert not hasattr(FeedbackRouter(), 'judge')

def test_feedback_router_resumes_from_state_dict():
    import json
    from cove.core import Task, Feedback
    from cove.router import FeedbackRouter
    seq = ['wrong_answer', 'tool_error', 'ok', 'wrong_answer', 'wrong_answer', 'tool_error', 'format', 'ok'] * 2
    whole = [d.to_dict() for d in _feedback_stream(FeedbackRouter(), 'math', seq)]
    for cut in (1, 5, 11):
        head = FeedbackRouter()
        _feedback_stream(head, 'math', seq[:cut])
        back = FeedbackRouter().load_state_dict(json.loads(json.dumps(head.state_dict())))
        fb = lambda k: Feedback('success', 1.0, 'correct') if k == 'ok' else Feedback('failure', 0.0, k, k)
        tail = [back.decide(Task(f'math-{i}', 'math', 'train', 'q'), fb(seq[i])).to_dict()
                for i in range(cut, len(seq))]
        assert tail == whole[cut:]
