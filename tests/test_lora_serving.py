"""`model.lora_serving` without a server: the key and the client reject an unknown mode, a run's `openai` policy gets
the profile's mode, and `merge_adapter` writes the merged weights as safetensors under the names vLLM loads (the base
model's), computing what base + adapter compute. Against a real vLLM server: tests/test_vllm.py."""
import copy
import pytest, torch


def test_the_mode_key_validates():
    from cove.config import load_config
    from cove.served import OpenAIPolicy
    from cove.run import load_policy
    assert load_config('cpu')['model.lora_serving'] == 'merged'
    with pytest.raises(ValueError, match='lora_serving'): load_config('cpu', ['model.lora_serving=fused'])
    with pytest.raises(ValueError, match="not in \\('runtime', 'merged'\\)"):
        OpenAIPolicy('http://127.0.0.1:9/v1', 'm', lora_serving='fused')
    over = {'model.backend': 'openai', 'model.base_url': 'http://127.0.0.1:9/v1', 'model.lora_serving': 'runtime'}
    assert load_policy(load_config('cpu', over)).lora_serving == 'runtime'
    assert load_policy(load_config('cpu', {**over, 'model.lora_serving': 'merged'})).lora_serving == 'merged'


def test_merge_writes_the_base_names(tmp_path):
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM
    from cove.llm import tiny_llama
    from cove.served import merge_adapter, merged_folder
    tiny, _ = tiny_llama()
    tiny.save_pretrained(tmp_path/'base')
    torch.manual_seed(0)
    cfg = LoraConfig(r=4, target_modules=['q_proj', 'v_proj', 'down_proj'], init_lora_weights=False)
    lora = get_peft_model(copy.deepcopy(tiny), cfg)
    lora.save_pretrained(tmp_path/'adapters'/'adapter-0001')
    out = merge_adapter(tmp_path/'adapters'/'adapter-0001', tmp_path/'base')
    assert out == merged_folder(tmp_path/'adapters'/'adapter-0001') == (tmp_path/'adapters'/'adapter-0001.merged')
    assert sorted(p.name for p in (tmp_path/'adapters').iterdir()) == ['adapter-0001', 'adapter-0001.merged']
    with safe_open(out/'model.safetensors', 'pt') as f: names = set(f.keys())
    with safe_open(tmp_path/'base'/'model.safetensors', 'pt') as f: base = {k: f.get_tensor(k) for k in f.keys()}
    assert names == set(base) and not any('lora' in n or 'base_layer' in n for n in names)
    with safe_open(out/'model.safetensors', 'pt') as f:
        changed = {n for n in names if not torch.equal(f.get_tensor(n), base[n])}
        assert all(f.get_tensor(n).dtype == torch.float32 for n in names)
    assert changed and all(n.endswith(('q_proj.weight', 'v_proj.weight', 'down_proj.weight')) for n in changed)
    ids = torch.tensor([[1, 5, 9, 3]])
    with torch.no_grad():
        got = AutoModelForCausalLM.from_pretrained(out).eval()(ids).logits
        ref = lora.eval()(ids).logits
    assert torch.allclose(got, ref, atol=1e-4)


def test_merges_reuse_one_cached_base(tmp_path, monkeypatch):
    """Two merges load the base once (`cove.served._BASES`), each gives the weights a fresh load + peft merge gives, and
    the cached base keeps the weights on disk; a base rewritten on disk is loaded again."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM
    from cove.llm import tiny_llama
    from cove import served
    tiny, _ = tiny_llama()
    tiny.save_pretrained(tmp_path/'base')
    for i, mods in enumerate((['q_proj', 'v_proj'], ['up_proj', 'o_proj'])):
        torch.manual_seed(i)
        lora = get_peft_model(copy.deepcopy(tiny), LoraConfig(r=4, target_modules=mods, init_lora_weights=False))
        lora.save_pretrained(tmp_path/f'a{i}')
    loads, load = [], AutoModelForCausalLM.from_pretrained.__func__
    monkeypatch.setattr(AutoModelForCausalLM, 'from_pretrained',
                        classmethod(lambda cls, *a, **k: loads.append(a[0]) or load(cls, *a, **k)))
    outs = [served.merge_adapter(tmp_path/a, tmp_path/'base') for a in ('a0', 'a1', 'a0')]
    assert len(loads) == 1
    monkeypatch.undo()
    for a, out in zip(('a0', 'a1', 'a0'), outs):
        ref = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tmp_path/'base', dtype=torch.float32),
                                        str(tmp_path/a)).merge_and_unload().state_dict()
        got = load_file(out/'model.safetensors')
        assert got and all(torch.equal(v, ref[k]) for k, v in got.items()), a
    base = served._cached_base(tmp_path/'base')
    assert all(torch.equal(v, tiny.state_dict()[k]) for k, v in base.state_dict().items())
    torch.manual_seed(9)
    tiny_llama()[0].save_pretrained(tmp_path/'base')   # another base in the same folder
    assert served._cached_base(tmp_path/'base') is not base
