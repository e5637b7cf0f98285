"""cove's `openai` backend against a real OpenAI-compatible server on 127.0.0.1 (`transformers serve`
with the embedded SmolLM2 on CPU): chat, stop strings, exact token counts, a few recorded episodes, the CLI path, and
the clear errors for what this server lacks (`/tokenize`, prompt logprobs, LoRA adapters by name)."""
import importlib.util, json, os, signal, socket, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SERVING = ('openai', 'fastapi', 'uvicorn')   # transformers[serving]; `make test` installs them with cove's dev extra
missing = [m for m in SERVING if importlib.util.find_spec(m) is None]
# each pytest-xdist worker that draws one of these tests starts its own server (~7 s); `--dist loadgroup` would pin them
# to one, but pytest-xdist 3.8 groups by `item._nodeid`, which pytest 9 no longer reads
pytestmark = pytest.mark.skipif(bool(missing), reason=f"transformers serve needs {missing}: pip install -e '.[dev]'")

READY_S = 120   # loading the 135M model on CPU takes ~7 s here


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _healthy(url:str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r: return r.status == 200
    except OSError: return False


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    """`transformers serve` pinned to the embedded model's folder, on a free loopback port; killed (its group) at the
    end."""
    from cove.llm import pick_dtype
    from cove.models import ensure_embedded_model
    model = str(ensure_embedded_model())
    port, log = _free_port(), tmp_path_factory.mktemp('serve')/'server.log'
    dtype = str(pick_dtype('auto')).removeprefix('torch.')   # bf16 where the CPU has it, as model.dtype=auto
    cmd = [sys.executable, '-c', 'from transformers.cli.transformers import main; main()', 'serve', model,
           '--host', '127.0.0.1', '--port', str(port), '--device', 'cpu', '--dtype', dtype, '--log-level', 'warning']
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1', 'OMP_NUM_THREADS': '1',
           'TOKENIZERS_PARALLELISM': 'false'}
    with open(log, 'wb') as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.time()
        while not _healthy(url):
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            if time.time() - t0 > READY_S:
                pytest.fail(f"transformers serve not ready in {READY_S} s: {log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield dict(url=url, base_url=f"{url}/v1", model=model, port=port)
    finally:
        if proc.poll() is None: os.killpg(proc.pid, signal.SIGTERM)
        try: proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope='module')
def tok():
    from cove.llm import smollm2_tokenizer
    return smollm2_tokenizer()


def _policy(server, **kw):
    from cove.llm import make_policy
    return make_policy('openai', server['model'], base_url=server['base_url'], batch_size=2, **kw)


def test_chat_counts_equal_the_local_tokenizer(server, tok):
    "usage's prompt tokens = the embedded tokenizer's count of the chat template; a capped reply has max_tokens tokens."
    from cove.core import msg
    from cove.llm import count_tokens_with
    pol = _policy(server)
    assert type(pol.client).__name__ == 'OpenAI'   # the official client, not hand-written HTTP
    convs = [[msg('user', 'Count from 1 to 10.')], [msg('system', 'Be brief.'), msg('user', 'Name a colour.')]]
    gens = pol.generate(convs, max_new_tokens=8, seed=0)
    assert [g.prompt_tokens for g in gens] == [count_tokens_with(tok, c) for c in convs]
    assert all(g.text.strip() for g in gens)
    assert (gens[0].completion_tokens, gens[0].finish_reason) == (8, 'length')   # 1..10 never fits in 8 tokens
    assert all(0 < g.completion_tokens <= 8 for g in gens)
    assert (pol.ledger.prompt_tokens, pol.ledger.completion_tokens) == (
        sum(g.prompt_tokens for g in gens), sum(g.completion_tokens for g in gens))
    assert pol.ledger.by_kind['generate']['calls'] == 2
    again = pol.generate(convs[:1], max_new_tokens=8, seed=0)   # greedy (temperature 0) with a seed: the same reply
    assert again[0].text == gens[0].text


def test_stop_strings(server, tok):
    "The server stops at a stop string; cove cuts it off and, with a local tokenizer, recounts the completion."
    from cove.core import msg
    conv = [msg('user', 'Count from 1 to 10, one number per line.')]
    full = _policy(server).generate([conv], max_new_tokens=40)[0]
    assert '5' in full.text, full.text
    pol = _policy(server, tokenizer=tok)
    g = pol.generate([conv], max_new_tokens=40, stop=['5'])[0]
    assert '5' not in g.text and full.text.startswith(g.text) and g.finish_reason == 'stop', (g, full)
    assert g.completion_tokens < full.completion_tokens
    assert g.completion_tokens == len(tok(g.text, add_special_tokens=False)['input_ids'])


def test_what_this_server_lacks_fails_clearly(server, tok):
    "No /tokenize, no echoed prompt logprobs, no LoRA by name, one pinned model name: each a one-line error."
    from cove.policy import make_policy
    from cove.served import HTTPError
    pol = _policy(server)
    with pytest.raises(NotImplementedError, match='no /tokenize route; pass tokenizer='):
        pol.count_tokens('hello')
    assert _policy(server, tokenizer=tok).count_tokens('hello') == len(tok('hello',
                                                                           add_special_tokens=False)['input_ids'])
    with pytest.raises(NotImplementedError,
                       match='returned no echoed prompt logprobs|does not support prompt logprobs'):
        _policy(server, tokenizer=tok).score_choices('Is it volatile?', ['stable', 'volatile'])
    # adapters by name need vLLM (`--enable-lora --lora-modules name=path`, or `/v1/load_lora_adapter`)
    with pytest.raises(NotImplementedError, match='cannot load adapters at run time: HTTP 404'):
        pol.load_adapter('/srv/adapters/step3', 'step3')
    assert pol.adapters == []
    other = make_policy('openai', 'smollm2-135m', base_url=server['base_url'])   # the server is pinned to its folder
    with pytest.raises(HTTPError, match=r'^HTTP 4\d\d from .*pinned') as e:
        other.generate(['hi'], max_new_tokens=2)
    assert '\n' not in str(e.value)


def test_episodes_through_the_server(server, tmp_path):
    "Three embedded tableqa episodes played by `base` through the served policy: recorded, with tokens, ledger-counted."
    from cove.config import load_config
    from cove.run import Run, RunSpec, load_policy
    cfg = load_config(env={}, overrides={'model.backend': 'openai', 'model.base_url': server['base_url'],
                                         'model.name': server['model'], 'model.batch_size': 3,
                                         'model.max_new_tokens': 24})
    pol = load_policy(cfg)
    m = Run(RunSpec('base', ['tableqa'], 3), cfg, tmp_path/'run').execute(pol, progress=False)
    recs = [json.loads(l) for l in (tmp_path/'run'/'episodes.jsonl').read_text().splitlines()]
    assert [r['episode'] for r in recs] == [0, 1, 2] and m['overall']['n'] == 3
    assert all(r['prompt_tokens'] > 0 and r['completion_tokens'] > 0 and r['kind'] != 'infra' for r in recs), recs
    assert m['overall']['errors'] == 0
    assert pol.ledger.prompt_tokens == sum(r['prompt_tokens'] for r in recs) == m['overall']['prompt_tokens']
    assert pol.ledger.completion_tokens == sum(r['completion_tokens'] for r in recs) == m['overall']['completion_tokens']


def test_cli_run_through_the_server(server, tmp_path):
    "`cove run --set model.backend=openai --set model.base_url=...`: two episodes, recorded with their token counts."
    out = tmp_path/'cli'
    r = subprocess.run(
        [str(Path(sys.executable).parent/'cove'), 'run', '--method', 'base', '--tasks', 'tableqa', '--episodes', '2',
         '--out', str(out), '--quiet', '--set', 'model.backend=openai', '--set', f"model.base_url={server['base_url']}",
         '--set', f"model.name={server['model']}", '--set', 'model.max_new_tokens=24'],
        cwd=ROOT, capture_output=True, text=True, timeout=180, env={**os.environ, 'OMP_NUM_THREADS': '1'})
    assert r.returncode == 0, r.stderr[-2000:]
    overall = json.loads(r.stdout.strip().splitlines()[-1])['overall']
    assert (overall['n'] == 2 and overall['errors'] == 0 and overall['prompt_tokens'] > 0
            and overall['completion_tokens'] > 0)
