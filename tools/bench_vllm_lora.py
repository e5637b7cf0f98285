#!/usr/bin/env python3
"""vLLM's CPU build with and without a LoRA adapter active: the same real first-turn prompts timed twice.

usage: .venv/bin/python tools/bench_vllm_lora.py ADAPTER_DIR [--per-family 4] [--dtype bfloat16]
ADAPTER_DIR is a LoRA adapter cove wrote (e.g. a demo run's `parametric_only/adapters/adapter-0001`). Needs `make vllm`.
"""
import argparse, time
from cove.agent import build_messages
from cove.config import load_config
from cove.serve import served_policy
from cove.spec import open_envs

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('adapter')
    ap.add_argument('--per-family', type=int, default=4)
    ap.add_argument('--dtype', default='bfloat16')
    a = ap.parse_args()
    cfg = load_config()
    envs = open_envs(['tableqa', 'math', 'multihop', 'code'], cfg)
    msgs = [build_messages(e, t) for e in envs.values() for t in e.tasks('test', a.per_family, 0)]
    secs = {}
    with served_policy(cfg, dtype=a.dtype) as pol:
        pol.generate(msgs[:2], max_new_tokens=8)   # warm-up
        for name in (None, 'adapter'):
            if name:
                pol.load_adapter(a.adapter, name)
                pol.set_adapter(name)
                pol.generate(msgs[:2], max_new_tokens=8)
            t = time.perf_counter()
            gens = pol.generate(msgs, max_new_tokens=96)
            secs[name or 'base'] = time.perf_counter() - t
            print(f"{name or 'base'}: {secs[name or 'base']:.1f} s, {sum(g.completion_tokens for g in gens)} tokens")
    print(f"lora_slowdown: {secs['adapter'] / secs['base']:.2f}")

if __name__ == '__main__': main()
