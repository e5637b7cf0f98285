"""Issue 55, "Hangs": every parser and grader bounded. One answer or gold row (a huge exponent, a word repeated before a
`!`, a citation mark repeated), a server that drips its headers, or a FIFO in place of a dataset file must never stall
a run. A call that once hung runs in a forked process joined with a deadline, so that a regression fails fast."""
import http.server, json, multiprocessing as mp, os, threading, time
import pytest
from conftest import TALLY
from cove.core import Task
from cove.tasks.base import EpisodeState
from cove.tasks.math import (GSM8KEnv, MATHEnv, extract_math_answer, gsm8k_reference, math_equiv, math_feedback,
                             numbers_equal, numeric_answer, strip_math, to_number)

def _child(conn, fn, args):
    try: conn.send(('ok', fn(*args)))
    except BaseException as e: conn.send(('raised', f'{type(e).__name__}: {e}', [c.__name__ for c in type(e).__mro__]))

def within(seconds:float, fn, *args):
    """`fn(*args)` in a forked process: its result, or `('raised', 'type: message', its classes)` of what it raised;
    fails the test when it has not answered after `seconds`."""
    a, b = mp.get_context('fork').Pipe(duplex=False)
    p = mp.get_context('fork').Process(target=_child, args=(b, fn, args), daemon=True)
    p.start()
    got = a.recv() if a.poll(seconds) else None
    p.kill()
    p.join()
    if got is None: TALLY['hung'] += 1
    assert got is not None, f'{getattr(fn, "__name__", fn)}{args!r:.80} still running after {seconds} s (hung)'
    return got[1] if got[0] == 'ok' else got

HUGE = ['1e999999999', '1e-999999999', '-1E+999999999', '2.5e999999999', '1' * 5000, '\\frac{' + '1' * 5000 + '}{2}',
        '3\\frac{1}{' + '7' * 5000 + '}', '\\frac{1e999999999}{3}']

def _numbers(xs): return [to_number(x) for x in xs]

def test_oversized_numbers_are_no_numbers(hostile):
    "A number too long or with too large an exponent is no number (None), quickly and without a traceback."
    got = within(10, _numbers, HUGE)
    assert got == [None] * len(HUGE), got
    hostile.refused(len(HUGE))
    assert _numbers(['1e5', '2.5E-3', '-1e+2', '\\frac{3}{4}', '0.' + '3' * 300]) == [
        100000, to_number('0.0025'), -100, to_number('0.75'), to_number('0.' + '3' * 300)]

def _grades(pairs):
    out = []
    for pred, gold, numeric in pairs:
        st = EpisodeState(Task('t', 'math', 'test', 'q', target=gold), actions=[pred], answer=extract_math_answer(pred))
        fb = math_feedback(st, numeric)
        out.append((fb.success, fb.kind))
    return out

def test_oversized_answers_are_graded_wrong(hostile):
    "`Answer: 1e999999999` against a small gold (and the reverse) is a wrong or unparseable answer, graded at once."
    pairs = [(f'Answer: {x}', g, numeric) for x in HUGE for g in ('5', '0.5') for numeric in (True, False)]
    pairs += [('Answer: 1e999999999', '1e999999999', False)]    # the same text is still the same answer
    got = within(20, _grades, pairs)
    assert got[:-1] == [(False, got[i][1]) for i in range(len(pairs) - 1)], got
    assert {k for _, k in got[:-1]} <= {'wrong_answer', 'format'}, got
    assert got[-1][0] is True
    assert within(10, numbers_equal, '1e999999999', '1e999999998') is None
    assert within(10, math_equiv, '1e-999999999', '0') is False
    hostile.refused(len(pairs))

def test_oversized_gold_is_a_one_line_error():
    "A GSM8K gold `#### 1e999999999` raises one clear `ValueError` at once."
    got = within(10, gsm8k_reference, 'She has 3.\n#### 1e999999999')
    assert got[0] == 'raised' and 'ValueError' in got[2] and 'too large' in got[1] and '\n' not in got[1], got
    assert gsm8k_reference('So 2 + 3 = 5.\n#### 5') == ('So 2 + 3 = 5.\nAnswer: 5', '5')

def _load(env_cls, root):
    env = env_cls(root)
    ts = env.load()
    return [t.target for t in ts], env.report.n_bad, [str(e) for e in env.report.errors]

def test_oversized_gold_rows_are_skipped_and_counted(tmp_path, hostile):
    "GSM8K and MATH loads skip a row whose gold is an oversized number, count it and go on (no hang, no crash)."
    (tmp_path/'gsm8k').mkdir()
    rows = [dict(question='How many?', answer='#### 1e999999999'), dict(question='And now?', answer='2 + 2\n#### 4'),
            dict(question='Tiny?', answer='#### 1e-999999999')]
    (tmp_path/'gsm8k'/'train.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    targets, bad, errors = within(20, _load, GSM8KEnv, tmp_path)
    assert (targets, bad) == (['4'], 2) and all('too large' in e for e in errors), errors
    (tmp_path/'math').mkdir()
    rows = [dict(problem='Big?', answer='1e999999999'), dict(problem='Half?', answer='\\frac{1}{2}')]
    (tmp_path/'math'/'train.json').write_text(json.dumps(rows))
    targets, bad, errors = within(20, _load, MATHEnv, tmp_path)
    assert (targets, bad) == (['\\frac{1}{2}'], 1) and 'too large' in errors[0], errors
    hostile.refused(3)

REPEATS = ['Answer: 1 ' + 'a' * 60 + '!', 'Answer: 12 ' + 'ab ' * 40 + '?', 'Answer: 3 ' + 'aa.' * 40 + '#',
           'Answer: \\boxed{1 ' + 'a' * 60 + '!}']

def _strip_all(xs): return [strip_math(extract_math_answer(x)) for x in xs]

def test_repeated_words_do_not_backtrack(hostile):
    "A word repeated before a stray character (a small model's loop) is normalised in linear time."
    got = within(10, _strip_all, REPEATS)
    assert got[0] == '1' + 'a' * 60 + '!', got
    assert within(20, _grades, [(x, '1', n) for x in REPEATS for n in (True, False)])
    hostile.refused(len(REPEATS))
    # what the unit stripping did before still holds
    assert [strip_math(x) for x in ['14 inches', '5 sq. ft.', '3 cm^2', '1,000 square feet', '7 apples and pears']] \
        == ['14', '5', '3', '1000', '7']
    assert [strip_math(x) for x in ['5\\text{ cm}^2', '2 x', 'x + 1']] == ['5', '2x', 'x+1']

def _wtq(xs):
    from cove.tasks.tableqa import wtq_normalize
    return [wtq_normalize(x) for x in xs]

def test_wtq_normalize_citations_are_linear(hostile):
    "WTQ's citation stripping on a repeated `[1]` that does not end the answer: linear, and the same strings as before."
    got = within(10, _wtq, ['a' + '[1]' * 60 + 'x', 'a' + ' (b' * 3000, 'b' + '[1][x]' * 40 + '!'])
    assert got[0] == 'a' + '[1]' * 60 + 'x' and got[1] == 'a' + ' (b' * 3000, got
    hostile.refused(3)
    seen = ['Paris[1]', 'Paris [2][note 3]†', 'Rome (Italy)', 'Rome (Italy) (city)', '"Oslo"', '[1]', '[note]',
            'x (a) [1]', 'x*#', '+1', 'a [b] [1]']
    assert _wtq(seen) == ['paris', 'paris', 'rome', 'rome', 'oslo', '', '[note]', 'x', 'x', '+1', 'a']

class _Drip(http.server.BaseHTTPRequestHandler):
    "Answers a POST with a status line, then one header byte every 0.2 s for `DRIP_S` seconds."
    DRIP_S = 20.0   # far past the 1 s deadline: a call that waits for the headers ends after it, however loaded
    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length', 0)))
        self.wfile.write(b'HTTP/1.1 200 OK\r\n')
        end = time.monotonic() + self.DRIP_S
        try:
            while time.monotonic() < end:
                self.wfile.write(b'X')
                self.wfile.flush()
                time.sleep(0.2)
        except OSError: pass
    def log_message(self, *a): pass

@pytest.fixture
def drip_server():
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Drip)
    srv.daemon_threads, srv.block_on_close = True, False   # teardown does not wait for the dripping handler
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f'http://127.0.0.1:{srv.server_address[1]}'
    srv.shutdown()
    srv.server_close()

@pytest.mark.timeout(60)
def test_dripped_headers_end_at_the_deadline(drip_server, hostile):
    "A server that drips its headers is ended by `timeout` (connect + headers + body), through both HTTP paths."
    from cove.served import OpenAIPolicy, post_json
    t = time.monotonic()
    with pytest.raises(TimeoutError): post_json(drip_server + '/v1/completions', {'x': 1}, timeout=1.0)
    assert time.monotonic() - t < _Drip.DRIP_S, f'post_json took {time.monotonic() - t:.1f} s: it waited'
    pytest.importorskip('openai')
    pol = OpenAIPolicy(drip_server, 'm', timeout=1.0, max_retries=0)
    t = time.monotonic()
    with pytest.raises(TimeoutError): pol._post('/v1/completions', {'x': 1})
    assert time.monotonic() - t < _Drip.DRIP_S, f'the openai client took {time.monotonic() - t:.1f} s: it waited'
    hostile.refused(2)

def _bcb_load(root):
    from cove.tasks.code_benchmarks import BigCodeBenchEnv
    return BigCodeBenchEnv(root, workers=1).load()

def test_fifo_dataset_file_is_refused(tmp_path, hostile):
    "A FIFO named like BigCodeBench's `.jsonl.gz` is refused with one line naming it, without waiting for a writer."
    (tmp_path/'bigcodebench').mkdir()
    os.mkfifo(tmp_path/'bigcodebench'/'BigCodeBench.jsonl.gz')
    got = within(10, _bcb_load, tmp_path)
    assert got[0] == 'raised' and 'ValueError' in got[2] and 'BigCodeBench.jsonl.gz' in got[1], got
    assert 'not a regular file' in got[1] and '\n' not in got[1], got
    hostile.refused()
