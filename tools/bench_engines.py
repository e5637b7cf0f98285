"""Side-by-side speed of cove's `hf` policy, the llama.cpp backend (`cove.llamacpp`) and vLLM served on loopback
(`cove.serve`, `vllm-fp32`: needs `make vllm`) on real episode prompts.

Issue 23, item 2. Both engines run in this one process, interleaved, with the same threads, so a machine shared with
other jobs slows both alike (not equally: compare the CPU-seconds too). Two measurements:

- `generate`: the first-turn prompts of `--per-family` test tasks of tableqa, multihop, math and code, built as
  `HarnessAgent` builds them (worked examples, the families' stops), completed greedily at each `--batches` size;
  completion tokens per second (wall and per CPU-second), and the share of completions identical to `hf`'s.
- `rollout`: the same tasks played as episodes by `HarnessAgent` (chunks of `--rollout-batch`, as `cove run` plays
  them); episodes per minute, and the share of episodes whose whole transcript is identical to `hf` bf16's
  and to `hf` fp32's.

Usage: `OMP_WAIT_POLICY=PASSIVE .venv/bin/python tools/bench_engines.py --out /tmp/bench_engines.json`.
Both engines run on the OpenMP runtime torch loads (llama.cpp's CPU backend links the same `libgomp.so.1`), which
reads `OMP_WAIT_POLICY` once: set it in the environment. On a loaded machine the default (spinning) policy slows both
engines by an order of magnitude; `PASSIVE` costs some speed on an idle one.
The figures of the first run are in nbs/02c_llamacpp.ipynb ("Measured").
"""
from __future__ import annotations
import argparse, json, os, platform, time
from pathlib import Path

ENGINES = ('hf-bf16', 'hf-fp32', 'llamacpp-bf16', 'llamacpp-f32', 'llamacpp-q8_0', 'vllm-fp32', 'vllm-bf16')

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--per-family', type=int, default=8, help='test tasks per family (4 families)')
    p.add_argument('--b1-per-family', type=int, default=2, help='tasks per family at batch size 1')
    p.add_argument('--batches', default='1,16,32', help='batch sizes of the generate measurement')
    p.add_argument('--engines', default='hf-bf16,hf-fp32,llamacpp-bf16', help=f'engines among {",".join(ENGINES)}')
    p.add_argument('--rollout-engines', default='hf-bf16,hf-fp32,llamacpp-bf16',
                   help='engines of the rollout measurement ("" skips it)')
    p.add_argument('--rollout-batch', type=int, default=16, help='episodes played together (model.batch_size)')
    p.add_argument('--rollout-repeats', type=int, default=2, help='rollouts per engine, interleaved')
    p.add_argument('--threads', type=int, default=2)
    p.add_argument('--max-new-tokens', type=int, default=0,
                   help='generate only; 0: the cpu profile\'s model.max_new_tokens (rollouts always use it)')
    p.add_argument('--out', default='/tmp/bench_engines.json')
    return p.parse_args(argv)

def episode_prompts(cfg, per_family:int):
    "`(envs by family, [(family, task)], [prompt messages], stops)`: first-turn prompts as `HarnessAgent` makes them."
    from cove.spec import open_envs, task_stream
    from cove.agent import HarnessAgent, _stops
    envs = open_envs(['tableqa', 'multihop', 'math', 'code'], cfg)
    agent, pairs, prompts = HarnessAgent.from_config(None, cfg), task_stream(envs, per_family, 'test', 0), []
    for s, t in pairs:   # interleaved by family, as `cove run` streams them
        e = agent._start(envs[s], t, [])
        prompts.append(e['messages'][:1] + e['shots'] + e['messages'][1:])
    return envs, pairs, prompts, _stops(envs.values())

SERVERS = []   # vLLM servers started here, stopped at exit

def load_engine(name:str, threads:int, slots:int):
    "A policy for engine `name` (`hf-bf16`, `llamacpp-f32`, `vllm-fp32` (served by `cove serve`'s code), ...)."
    kind, dt = name.split('-')
    if kind == 'vllm':
        import atexit
        from cove.serve import VLLMServer
        from cove.llm import make_policy
        from cove.models import ensure_embedded_model
        srv = VLLMServer('smollm2-135m', threads=threads, dtype={'bf16': 'bfloat16', 'fp32': 'float32'}[dt]).start()
        SERVERS.append(srv)
        atexit.register(srv.stop)
        return make_policy('openai', 'smollm2-135m', base_url=srv.base_url, batch_size=16,
                           tokenizer=str(ensure_embedded_model()))
    if kind == 'hf':
        from cove.llm import HFPolicy
        return HFPolicy.load('smollm2-135m', dtype={'bf16': 'bfloat16', 'fp32': 'float32'}[dt], batch_size=16)
    from cove.llamacpp import LlamaCppPolicy
    return LlamaCppPolicy.load('smollm2-135m', dtype=dt, batch_size=16, slots=slots, threads=threads)

def clear(pol):
    "Forget kept prompts, so each measurement starts cold."
    if hasattr(pol, 'prefix_cache'): pol.prefix_cache.clear()
    elif hasattr(pol, 'clear_cache'):
        pol.clear_cache()
        reuse(pol)

def reuse(pol) -> dict:
    "The share of prompt tokens llama.cpp did not prefill (kept or copied) since the last call; resets its counts."
    st = getattr(pol, 'stats', None)
    if not st: return {}
    out = dict(reused_share=round(st['reused_tokens'] / max(1, st['prompt_tokens']), 3))
    for k in ('prompt_tokens', 'reused_tokens', 'copies'): st[k] = 0
    return out

def timed(fn):
    "`(result, wall seconds, CPU seconds of this process)`."
    t, c = time.perf_counter(), time.process_time()
    r = fn()
    return r, time.perf_counter() - t, time.process_time() - c

def share_same(a:list, b:list) -> float:
    "The share of positions where `a` and `b` hold the same item."
    return round(sum(x == y for x, y in zip(a, b)) / max(1, len(a)), 3)

def bench_generate(pols:dict, prompts, stop, batches, b1_n:int, max_new:int) -> list[dict]:
    "Greedy completions of `prompts` by each engine at each batch size, interleaved (engine order flips per size)."
    rows = []
    for k, bs in enumerate(batches):
        ps = prompts[:b1_n] if bs == 1 else prompts
        names = list(pols) if k % 2 == 0 else list(pols)[::-1]
        texts = {}
        for name in names:
            pol = pols[name]
            pol.batch_size = bs
            clear(pol)
            gens, wall, cpu = timed(lambda: pol.generate(ps, max_new_tokens=max_new, stop=stop))
            ct, pt = sum(g.completion_tokens for g in gens), sum(g.prompt_tokens for g in gens)
            texts[name] = [g.text for g in gens]
            rows.append(dict(engine=name, batch=bs, n=len(ps), wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                             completion_tokens=ct, prompt_tokens=pt, tok_s=round(ct / wall, 1),
                             tok_per_cpu_s=round(ct / cpu, 1), load=round(os.getloadavg()[0], 2), **reuse(pol)))
            print(json.dumps(rows[-1]), flush=True)
        for r in rows[-len(names):]:
            for ref in (x for x in ('hf-bf16', 'hf-fp32') if x in texts):
                r[f'same_as_{ref}'] = share_same(texts[r['engine']], texts[ref])
    return rows

def bench_rollout(pols:dict, envs, pairs, cfg, batch:int, repeats:int) -> tuple[list[dict], dict]:
    "Play the episodes with each engine `repeats` times (interleaved); episodes per minute and identical transcripts."
    from cove.agent import HarnessAgent
    rows, traces = [], {}
    order = [n for r in range(repeats) for n in (list(pols) if r % 2 == 0 else list(pols)[::-1])]
    for name in order:
        pol = pols[name]
        pol.batch_size = batch
        clear(pol)
        agent = HarnessAgent.from_config(pol, cfg)
        def play():
            out = []
            for i in range(0, len(pairs), batch):
                chunk = pairs[i:i+batch]
                out += agent.run([envs[s] for s, _ in chunk], [t for _, t in chunk])
            return out
        res, wall, cpu = timed(play)
        tr = [json.dumps(r.messages) for r in res]
        traces.setdefault(name, tr)
        n = len(res)
        rows.append(dict(engine=name, episodes=n, wall_s=round(wall, 2), cpu_s=round(cpu, 2),
                         episodes_per_min=round(60 * n / wall, 2), episodes_per_cpu_min=round(60 * n / cpu, 2),
                         success=round(sum(r.success for r in res) / n, 3), turns=sum(r.turns for r in res),
                         completion_tokens=sum(r.completion_tokens for r in res),
                         prompt_tokens=sum(r.prompt_tokens for r in res),
                         same_as_first_run=share_same(tr, traces[name]),
                         load=round(os.getloadavg()[0], 2), **reuse(pol)))
        print(json.dumps(rows[-1]), flush=True)
    same = {f'{n} vs {ref}': share_same(t, traces[ref])
            for ref in ('hf-bf16', 'hf-fp32') if ref in traces for n, t in traces.items() if n != ref}
    return rows, same

def summary(gen:list[dict], roll:list[dict], demo:int, ref:str='hf-bf16') -> dict:
    "Ratios to `ref` (today's hf path): completion tok/s at each batch size, and episodes per minute (medians over repeats)."
    import statistics as st
    out = {'reference': ref}
    for r in gen:
        base = next((b for b in gen if b['engine'] == ref and b['batch'] == r['batch']), None)
        if base is None: continue
        r['ratio_to_ref'] = round(r['tok_s'] / base['tok_s'], 2)
        r['cpu_ratio_to_ref'] = round(r['tok_per_cpu_s'] / base['tok_per_cpu_s'], 2)
    epm = {n: st.median(r['episodes_per_min'] for r in roll if r['engine'] == n) for n in {r['engine'] for r in roll}}
    epc = {n: st.median(r['episodes_per_cpu_min'] for r in roll if r['engine'] == n) for n in epm}
    if ref in epm:
        for n in epm:
            if n.startswith(('llamacpp', 'vllm')):
                out[f'rollout_speedup_over_hf[{n}]'] = round(epm[n] / epm[ref], 2)
                out[f'rollout_cpu_speedup_over_hf[{n}]'] = round(epc[n] / epc[ref], 2)
    for r in gen:
        if r['batch'] == demo and r['engine'].startswith(('llamacpp', 'vllm')) and 'ratio_to_ref' in r:
            out[f'gen_speedup_b{demo}[{r["engine"]}]'] = r['ratio_to_ref']
    return out

def main(argv=None):
    a = parse_args(argv)
    os.environ['OMP_NUM_THREADS'] = str(a.threads)
    from cove.config import load_config
    from cove.llm import set_threads, cpu_has_native_bf16
    set_threads(a.threads)
    cfg = load_config('cpu')
    max_new = a.max_new_tokens or cfg['model.max_new_tokens']
    batches = [int(b) for b in a.batches.split(',') if b]
    envs, pairs, prompts, stop = episode_prompts(cfg, a.per_family)
    b1_n = 4 * a.b1_per_family   # prompts are interleaved by family: the first 4k hold k of each
    names = [n for n in a.engines.split(',') if n]
    roll_names = [n for n in a.rollout_engines.split(',') if n]
    pols = {n: load_engine(n, a.threads, max(batches + [a.rollout_batch])) for n in dict.fromkeys(names + roll_names)}
    for p in pols.values(): p.generate(['Hi!'], max_new_tokens=2)   # warm-up
    gen = bench_generate({n: pols[n] for n in names}, prompts, stop, batches, b1_n, max_new)
    roll, same = ([], {}) if not roll_names else \
        bench_rollout({n: pols[n] for n in roll_names}, envs, pairs, cfg, a.rollout_batch, a.rollout_repeats)
    res = dict(machine=platform.platform(), cpu_bf16=cpu_has_native_bf16(), threads=a.threads,
               omp_wait_policy=os.environ.get('OMP_WAIT_POLICY'), when=time.strftime('%Y-%m-%dT%H:%M:%S'),
               max_new_tokens=max_new, n_prompts=len(prompts), generate=gen, rollout=roll,
               rollout_identical_transcripts=same,
               summary=summary(gen, roll, a.rollout_batch, 'hf-bf16' if cpu_has_native_bf16() else 'hf-fp32'))
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res['summary'] | {'rollout_identical_transcripts': same}), flush=True)
    return res

if __name__ == '__main__': main()
