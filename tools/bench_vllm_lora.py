#!/usr/bin/env python3
"""vLLM's CPU build on the base weights, with a LoRA adapter active at run time, and with the same adapter merged into
the weights (`model.lora_serving=merged`): the same real first-turn prompts timed on one server, interleaved.

usage: .venv/bin/python tools/bench_vllm_lora.py ADAPTER_DIR [--per-family 4] [--dtype bfloat16] [--rounds 2]
ADAPTER_DIR is a LoRA adapter cove wrote (e.g. a demo run's `parametric_only/adapters/adapter-0001`); its merge is
written next to it (`ADAPTER_DIR.merged`, removed at the end; the merge is timed apart from the reload). Needs
`make vllm`. Each round times base, runtime LoRA and merged once, in that order; the seconds printed are the sums over
the rounds.
"""
import argparse, os, shutil, time
from cove.agent import build_messages
from cove.config import load_config
from cove.policy import make_policy
from cove.served import merge_adapter, merged_folder
from cove.models import resolve_model
from cove.serve import served_policy
from cove.spec import open_envs

def timed(pol, msgs, secs, key):
    "Generate `msgs` greedily with `pol`, adding the seconds to `secs[key]`; the completions."
    t = time.perf_counter()
    gens = pol.generate(msgs, max_new_tokens=96)
    secs[key] = secs.get(key, 0.0) + time.perf_counter() - t
    return gens

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('adapter')
    ap.add_argument('--per-family', type=int, default=4)
    ap.add_argument('--dtype', default='bfloat16')
    ap.add_argument('--rounds', type=int, default=2)
    a = ap.parse_args()
    cfg = load_config()
    envs = open_envs(['tableqa', 'math', 'multihop', 'code'], cfg)
    msgs = [build_messages(e, t) for e in envs.values() for t in e.tasks('test', a.per_family, 0)]
    secs, reload_s, merge_s, toks = {}, [], [], {}
    with served_policy(cfg, dtype=a.dtype, lora_serving='merged') as merged:
        runtime = make_policy('openai', merged.model, base_url=merged.root, batch_size=merged.batch_size,
                              tokenizer=merged.tokenizer, lora_serving='runtime')   # the same server, by name
        runtime.load_adapter(a.adapter, 'adapter')
        merged.load_adapter(a.adapter, 'adapter')
        merged.generate(msgs[:2], max_new_tokens=8)   # warm-up
        for r in range(a.rounds):
            toks['base'] = sum(g.completion_tokens for g in timed(merged, msgs, secs, 'base'))
            runtime.set_adapter('adapter')
            runtime.generate(msgs[:2], max_new_tokens=8)
            toks['runtime'] = sum(g.completion_tokens for g in timed(runtime, msgs, secs, 'runtime'))
            runtime.set_adapter(None)
            t = time.perf_counter()
            merge_adapter(a.adapter, resolve_model(merged.model).path)
            merge_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            merged.set_adapter('adapter')   # reload in place + reset the prefix cache
            reload_s.append(time.perf_counter() - t)
            toks['merged'] = sum(g.completion_tokens for g in timed(merged, msgs, secs, 'merged'))
            t = time.perf_counter()
            merged.set_adapter(None)   # the base weights back
            reload_s.append(time.perf_counter() - t)
        runtime.unload_adapter('adapter')
        merged.unload_adapter('adapter')
    shutil.rmtree(merged_folder(a.adapter), ignore_errors=True)
    for k in ('base', 'runtime', 'merged'): print(f"{k}: {secs[k]:.1f} s, {toks[k]} tokens a round")
    print(f"lora_slowdown: {secs['runtime'] / secs['base']:.2f}")
    print(f"merged_slowdown: {secs['merged'] / secs['base']:.2f}")
    print(f"merge_s: {' '.join(f'{s:.2f}' for s in merge_s)}")
    print(f"reload_s (adapter, base, ...): {' '.join(f'{s:.2f}' for s in reload_s)}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

if __name__ == '__main__': main()
