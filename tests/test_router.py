"Router properties that need fresh processes: light imports, and Random-Route decisions that do not depend on the process's hash seed."
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
          "print(''.join('P' if r.decide(Task(f't{i}', 'math', 'train', ''), Feedback('failure', 0.0)).parametric else 'H' for i in range(64)))")

def test_random_route_is_stable_across_processes():
    a, b = _py(ROUTES, PYTHONHASHSEED='1'), _py(ROUTES, PYTHONHASHSEED='2')
    assert a == b and len(a) == 64 and 16 < a.count('P') < 48

def test_router_state_resumes_from_jsonl_log(tmp_path):
    "A router's decision log written as JSON lines is enough to rebuild its shares and family history after a kill."
    from cove.core import Task, Feedback, read_jsonl
    from cove.router import RandomRoute
    r = RandomRoute(p=0.5, seed=0, log_path=tmp_path/'router.jsonl')
    for i in range(30): r.decide(Task(f't{i}', 'math' if i % 3 else 'code', 'train', ''), Feedback('success' if i % 2 else 'failure', float(i % 2)))
    back = RandomRoute(p=0.5, seed=0).load_state_dict({'name': 'random_route', 'log': read_jsonl(tmp_path/'router.jsonl'), 'stats': dict(r.stats)})
    assert back.shares() == r.shares() and back.family_history('math') == r.family_history('math')

def test_routing_cases_and_zero_shot_template_stay_light():
    "Thirty hand-labelled routing cases, ten per channel; the zero-shot template needs no torch (few-shot imports the judge only when used)."
    out = _py("import sys; from collections import Counter; from cove.router import route_template, ROUTE_TEMPLATE, ROUTING_CASES\n"
              "assert route_template(0) == ROUTE_TEMPLATE\n"
              "print(len(ROUTING_CASES), sorted(Counter(c['gold'] for c in ROUTING_CASES).values()), 'torch' in sys.modules)")
    assert out == '30 [10, 10, 10] False'
