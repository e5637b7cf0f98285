"""The GPU smoke: cove's GPU path end to end on the tiny model, with its figures.

Run by `tools/gpu_smoke.sh` on a GPU machine (or `--device cpu` here, as a dry run of the same steps). Steps:
1. the tiny Llama (the SmolLM2 tokenizer, 2 layers, saved by `tools/gpu_smoke.sh prepare`) loaded on DEVICE in bf16;
   generation throughput of a batch of 32 conversations, 64 new tokens each;
2. a LoRA SFT update (TRL `SFTTrainer` through `cove.train.train_sft`), training tokens/s;
3. a GRPO update (TRL `GRPOTrainer` through `cove.train.train_grpo`, transformers generation), training tokens/s;
4. `cove run --profile gpu` with the `hf` backend, 4 episodes of the embedded math family;
5. (opt-in, `--vllm`) vLLM serving the model: completions, the SFT adapter loaded by name, a GRPO step through it.
Each step prints one `SMOKE` line; a failed step prints its error and the others still run; the exit status is the
number of failed steps. Figures go to OUT/gpu_smoke.json as well.
"""
from __future__ import annotations
import argparse, json, os, subprocess, sys, time, traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def gpu_memory(device:str) -> dict:
    import torch
    if not device.startswith('cuda'): return {}
    return dict(peak_gib=round(torch.cuda.max_memory_allocated() / 2**30, 3),
                reserved_gib=round(torch.cuda.max_memory_reserved() / 2**30, 3))


def step_env(device:str, model:str, out:Path) -> dict:
    import torch, transformers, peft, trl
    info = dict(python=sys.version.split()[0], torch=torch.__version__, transformers=transformers.__version__,
                peft=peft.__version__, trl=trl.__version__, device=device)
    if device.startswith('cuda'):
        info |= dict(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                     gpu_memory_gib=round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1))
    return info


def step_generate(device:str, model:str, out:Path) -> dict:
    import torch
    from cove.llm import HFPolicy
    pol = HFPolicy.load(model, dtype='bfloat16', device=device)
    convs = [[{'role': 'user', 'content': f'Count from {i} to {i + 40}, one number a line.'}] for i in range(32)]
    pol.generate(convs[:2], max_new_tokens=8)   # warm-up: kernels, caches
    if device.startswith('cuda'): torch.cuda.synchronize()
    t0 = time.perf_counter()
    gens = pol.generate(convs, max_new_tokens=64, min_new_tokens=64, temperature=0.0)
    if device.startswith('cuda'): torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    new = sum(g.completion_tokens for g in gens)
    return dict(dtype=str(next(pol.model.parameters()).dtype), batch=len(convs), new_tokens=new,
                seconds=round(dt, 3), gen_tokens_per_s=round(new / dt, 1)) | gpu_memory(device)


def step_sft(device:str, model:str, out:Path) -> dict:
    from cove.tasks.base import make_env
    from cove.train import reference_sft, train_sft
    env = make_env('math')
    data = reference_sft(env, env.tasks('train', n=16))
    res = train_sft(model, data, out/'sft', max_steps=4, batch_size=4, max_length=512, lr=1e-3,
                    use_cpu=device == 'cpu', bf16=device != 'cpu', dtype='bfloat16' if device != 'cpu' else None)
    return dict(steps=res.steps, train_tokens=res.train_tokens, seconds=round(res.seconds, 3),
                train_tokens_per_s=round(res.train_tokens / res.seconds, 1), loss=res.loss,
                adapter=Path(res.adapter_path).name) | gpu_memory(device)


def step_grpo(device:str, model:str, out:Path) -> dict:
    from cove.tasks.base import make_env
    from cove.train import grpo_prompts, make_task_reward, train_grpo
    env = make_env('math')
    tasks = env.tasks('train', n=8)
    reward = make_task_reward(env, tasks)
    res = train_grpo(model, grpo_prompts(env, tasks), reward, out/'grpo', num_generations=4, max_steps=2,
                     max_completion_length=32, use_cpu=device == 'cpu', bf16=device != 'cpu',
                     dtype='bfloat16' if device != 'cpu' else None)
    return dict(steps=res.steps, train_tokens=res.train_tokens, seconds=round(res.seconds, 3),
                train_tokens_per_s=round(res.train_tokens / res.seconds, 1), reward_calls=reward.stats['calls'],
                solved=reward.stats['solved']) | gpu_memory(device)


def step_run(device:str, model:str, out:Path) -> dict:
    run = out/'run'
    cli = 'import sys; from cove.cli import main; sys.exit(main(sys.argv[1:]))'
    cmd = [sys.executable, '-c', cli, 'run', '--profile', 'gpu', '--model', model, '--set', 'model.backend=hf',
           '--set', f'model.device={device}', '--set', 'model.batch_size=4', '--set', 'model.max_new_tokens=64',
           '--method', 'base', '--tasks', 'math', '--episodes', '4', '--out', str(run), '--quiet']
    if device == 'cpu': cmd += ['--set', 'model.dtype=float32', '--set', 'train.use_cpu=true']
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    dt = time.perf_counter() - t0
    if p.returncode: raise RuntimeError(f"cove run exited {p.returncode}: {p.stderr.strip()[-600:]}")
    eps = [json.loads(l) for l in (run/'episodes.jsonl').read_text().splitlines() if l.strip()]
    if len(eps) != 4: raise RuntimeError(f"cove run recorded {len(eps)} episodes, not 4")
    return dict(episodes=len(eps), solved=sum(bool(e.get('success')) for e in eps), seconds=round(dt, 1),
                command='cove ' + ' '.join(cmd[3:]))


def step_vllm(device:str, model:str, out:Path) -> dict:
    """vLLM serving the model (`cove.serve.VLLMServer`: the vllm venv from $COVE_VLLM_VENV, else .venv-vllm), greedy
    completions through `OpenAIPolicy`, the SFT step's adapter loaded at run time by name (when that step ran), and one
    GRPO step whose completions the server generates (`cove.train.served_rollout`). Opt-in: `--only vllm` or `--vllm`."""
    from cove.core import msg
    from cove.llm import make_policy
    from cove.serve import VLLMServer
    from cove.tasks.base import make_env
    from cove.train import grpo_prompts, hot_swap, make_task_reward, train_grpo
    convs = [[msg('user', f'Count from {i} to {i + 5}.')] for i in range(8)]
    dtype = 'float32' if device == 'cpu' else 'bfloat16'
    with VLLMServer(model, device=device, dtype=dtype, log=out/'vllm.log') as srv:
        pol = make_policy('openai', model, base_url=srv.base_url, batch_size=8, tokenizer=model)
        t0 = time.perf_counter()
        gens = pol.generate(convs, max_new_tokens=32)
        gen_s = time.perf_counter() - t0
        figs = dict(start_s=round(srv.ready_s, 1), new_tokens=sum(g.completion_tokens for g in gens),
                    gen_tokens_per_s=round(sum(g.completion_tokens for g in gens) / gen_s, 1))
        sft = sorted((out/'sft').glob('adapter-*'))
        if sft:
            figs['adapter'] = hot_swap(pol, sft[-1])
            figs['adapter_tokens'] = sum(g.completion_tokens for g in pol.generate(convs, max_new_tokens=16))
            pol.set_adapter(None)
        env = make_env('math')
        tasks = env.tasks('train', n=2)
        reward = make_task_reward(env, tasks)
        res = train_grpo(pol, grpo_prompts(env, tasks), reward, out/'vllm-grpo', num_generations=2, max_steps=1,
                         max_completion_length=16, use_cpu=device == 'cpu', bf16=device != 'cpu',
                         dtype='bfloat16' if device != 'cpu' else None)
        figs |= dict(grpo_steps=res.steps, grpo_reward_calls=reward.stats['calls'],
                     grpo_served_completions=pol.ledger.by_kind['generate']['calls'] - len(convs) * (1 + bool(sft)))
    return figs


STEPS = dict(env=step_env, generate=step_generate, sft=step_sft, grpo=step_grpo, run=step_run)
OPT_IN = dict(vllm=step_vllm)   # needs vLLM (make vllm here; a GPU build of vllm there)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default='cuda', help='cuda (default) or cpu (a dry run of the same steps)')
    ap.add_argument('--model', default=str(ROOT/'.gpu'/'tiny'), help='model folder (default .gpu/tiny)')
    ap.add_argument('--out', default=os.environ.get('OUT', str(ROOT/'outputs'/'gpu_smoke')))
    ap.add_argument('--only', help='comma-separated steps: ' + ','.join([*STEPS, *OPT_IN]))
    ap.add_argument('--vllm', action='store_true', help='add the vllm step (serving, runtime LoRA, GRPO through it)')
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if not (Path(a.model)/'config.json').exists():
        print(f"SMOKE error: no model at {a.model}; run `tools/gpu_smoke.sh prepare` first", flush=True)
        return 1
    figures, failed = {}, 0
    steps = {**STEPS, **OPT_IN}
    for name in (a.only.split(',') if a.only else [*STEPS, *(['vllm'] if a.vllm else [])]):
        t0 = time.perf_counter()
        try: figures[name] = steps[name](a.device, a.model, out) | dict(step_s=round(time.perf_counter() - t0, 1))
        except Exception as e:
            failed += 1
            figures[name] = dict(error=f"{type(e).__name__}: {e}"[:800], step_s=round(time.perf_counter() - t0, 1))
            traceback.print_exc()
        print(f"SMOKE {name}: {json.dumps(figures[name])}", flush=True)
    (out/'gpu_smoke.json').write_text(json.dumps(figures, indent=1))
    print(f"SMOKE done: {len(figures) - failed} of {len(figures)} steps passed", flush=True)
    return failed


if __name__ == '__main__': sys.exit(main())
