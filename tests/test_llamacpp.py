"The llama.cpp policy (`cove.llamacpp`) against `HFPolicy` on the embedded SmolLM2 (skipped without llama-cpp-python)."
import importlib.util, re, sys
from unittest import mock
import numpy as np
import pytest
from cove.llamacpp import gguf_tensors, pick_token, require_llama_cpp, shared_prefixes
from cove.llm import HFPolicy
from cove.models import embedded_model_path, ensure_embedded_model

HAVE = importlib.util.find_spec('llama_cpp') is not None
needs = pytest.mark.skipif(not HAVE, reason='llama-cpp-python is not installed (`pip install llama-cpp-python`)')
QS = [f"Tell me one fact about the number {i}." for i in range(5)]

def test_missing_llama_cpp_is_said_loudly():
    with mock.patch.dict(sys.modules, {'llama_cpp': None, 'llama_cpp.llama_cpp': None}):
        with pytest.raises(ImportError, match=r'pip install llama-cpp-python'): require_llama_cpp()

def test_gguf_tensors_are_the_embedded_weights():
    "The transformers checkpoint under GGUF names and llama.cpp's q/k row order equals the embedded file de-quantised."
    import gguf
    from safetensors.numpy import load_file
    sd = load_file(str(ensure_embedded_model()/'model.safetensors'))
    ts = gguf_tensors(sd, 9, 3, 30)
    for t in gguf.GGUFReader(str(embedded_model_path())).tensors:
        if t.name.startswith(('blk.0.', 'blk.29.')) or not t.name.startswith('blk.'):
            ref = gguf.quants.dequantize(t.data, t.tensor_type).reshape(ts[t.name].shape)
            assert np.array_equal(ref, ts[t.name]), t.name

def test_shared_prefixes_and_top_p():
    a = list(range(80))
    assert shared_prefixes([a + [1], a + [2], [3]*70]) == [a]
    lg = np.log(np.array([0.6, 0.3, 0.1], dtype=np.float32))
    rng = np.random.default_rng(0)
    assert {pick_token(lg, 1.0, 0.5, rng) for _ in range(50)} == {0}   # top-p 0.5: the argmax alone
    assert pick_token(lg) == 0

@pytest.fixture(scope='module')
def pols():
    from cove.llamacpp import LlamaCppPolicy
    l32 = LlamaCppPolicy.load('smollm2-135m', dtype='float32', batch_size=2, slots=6, threads=1)   # no thread barriers
    yield l32, HFPolicy.load('smollm2-135m', dtype='float32', batch_size=5)
    l32.close()

@needs
def test_greedy_matches_hf_and_batching(pols):
    "Two slots, five prompts (continuous batching): the texts and token counts of `HFPolicy` in float32."
    l32, hf = pols
    ours, theirs = l32.generate(QS, max_new_tokens=12), hf.generate(QS, max_new_tokens=12)
    assert [(g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in ours] == \
           [(g.text, g.prompt_tokens, g.completion_tokens, g.finish_reason) for g in theirs]
    assert l32.ledger.by_kind['generate']['completion_tokens'] >= sum(g.completion_tokens for g in ours)

@needs
def test_stops_and_reuse(pols):
    l32, hf = pols
    stop = ['fact', re.compile(r'\d+')]
    assert l32.generate(QS[:3], max_new_tokens=16, stop=stop) == hf.generate(QS[:3], max_new_tokens=16, stop=stop)
    before = l32.stats['reused_tokens']
    l32.generate(QS[2:3], max_new_tokens=4)        # the slot that held this prompt gives all but its last token
    assert l32.stats['reused_tokens'] - before == l32.count_tokens([{'role': 'user', 'content': QS[2]}]) - 1

@needs
def test_seeded_sampling_does_not_depend_on_batching(pols):
    l32, _ = pols
    kw = dict(max_new_tokens=10, temperature=0.9, top_p=0.9, seed=3)
    a = [g.text for g in l32.generate(QS[:3], **kw)]
    l32.batch_size = 1
    try: b = [g.text for g in l32.generate(QS[:3], **kw)]
    finally: l32.batch_size = 2
    assert a == b and len(set(a)) > 1
    assert l32.generate(QS[:1], max_new_tokens=6, min_new_tokens=6)[0].completion_tokens == 6

@needs
def test_score_choices_match_hf(pols):
    l32, hf = pols
    m = [{'role': 'user', 'content': 'Is fire hot? Answer yes or no.'}]
    ours, theirs = l32.score_choices(m, ['yes', 'no', 'Maybe.']), hf.score_choices(m, ['yes', 'no', 'Maybe.'])
    assert np.allclose(ours, theirs, atol=0.05), (ours, theirs)

@needs
def test_lora_adapter_matches_hf(pols, tmp_path):
    "A random adapter on the top layers' attention changes llama.cpp's completions as it changes hf's."
    import torch
    from peft import get_peft_model
    from cove.train import lora_config
    l32, hf = pols
    torch.manual_seed(0)
    base_model = HFPolicy.load('smollm2-135m', dtype='float32').model
    pm = get_peft_model(base_model, lora_config(r=4, layers=list(range(15, 30))))
    with torch.no_grad():
        for n, w in pm.named_parameters():
            if 'lora_B' in n: w.normal_(0, 0.02)
    pm.save_pretrained(str(tmp_path/'ad'))
    base = [g.text for g in l32.generate(QS[:3], max_new_tokens=12)]
    l32.load_adapter(tmp_path/'ad', 'ad')
    hf.load_adapter(tmp_path/'ad', 'ad')
    with l32.with_adapter('ad'), hf.with_adapter('ad'):
        ours = [g.text for g in l32.generate(QS[:3], max_new_tokens=12)]
        theirs = [g.text for g in hf.generate(QS[:3], max_new_tokens=12)]
    assert ours == theirs and ours != base
    assert [g.text for g in l32.generate(QS[:3], max_new_tokens=12)] == base
    l32.unload_adapter('ad')
    hf.unload_adapter('ad')
    with pytest.raises(KeyError): l32.set_adapter('ad')

@needs
def test_errors_are_loud(pols):
    from cove.llamacpp import LlamaCppPolicy
    l32, _ = pols
    with pytest.raises(ValueError, match='ctx_per_seq'): l32.generate(QS[:1], max_new_tokens=5000)
    with pytest.raises(FileNotFoundError, match='.gguf file'): LlamaCppPolicy.load('/no/such/model')
    l32.batch_size = 7
    try:
        with pytest.raises(ValueError, match='KV slots'): l32.generate(QS[:1], max_new_tokens=2)
    finally: l32.batch_size = 2
