#!/usr/bin/env python3
"""The pooled figures docs/claims.md cites beyond each notebook's paired comparisons, written by the grid.

`paired_pooled.md` (tools/sweep.py) pools the comparisons a notebook wrote into its `paired.csv`. Some claims compare
rates that are not paired (the same arm on two splits, a stage against another, a failure rate whose n is each arm's
own failures) or pool a measure that is not a success (attention mass per input). For those, each notebook below has
a function that reads its seed folders and returns markdown: rates as successes / trials summed over the seeds (Wilson
95% interval); two independent rates with `cove.stats.unpaired` (Newcombe's hybrid score interval, Fisher's exact p,
MDE); paired success over the same tasks with `cove.stats.pooled_paired` (stratified by seed); a paired mean
difference with scipy's one-sample t interval over the pooled inputs.

The grid writes `<notebook>/aggregate/pooled.md` for each notebook listed in `POOLED` (after `paired_pooled.md`). On a
grid that ran before this step existed:

    .venv/bin/python tools/pooled.py outputs/report/cpu [--only api_renaming,memrl_epochs]
"""
import argparse, json, sys
from collections import defaultdict
from pathlib import Path

import pandas as pd
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))   # run as a script from anywhere: `cove` is the repo's
from cove import core
from cove.stats import pooled_paired, unpaired, wilson

POOLED = {}   # notebook -> function(seed folders {seed: Path}) -> markdown lines

def pooled(name:str):
    "Register the pooled figures of notebook `name`."
    def add(f):
        POOLED[name] = f
        return f
    return add

# --- how a figure is shown ---------------------------------------------------------------------------------------------

def rate(k:int, n:int) -> str:
    "`46/96 = 0.479 [0.382, 0.578]`: successes of trials with the Wilson 95% interval."
    if not n: return f'{k}/0'
    lo, hi = wilson(int(k), int(n))
    return f'{int(k)}/{int(n)} = {k / n:.3f} [{lo:.3f}, {hi:.3f}]'

def mde_text(x) -> str:
    return 'n/a' if x is None else f'{x:.3f}'

def unpaired_text(k_a:int, n_a:int, k_b:int, n_b:int) -> str:
    "Two independent rates: `a - b = diff [lo, hi], Fisher p, MDE`."
    u = unpaired(int(k_a), int(n_a), int(k_b), int(n_b))
    return (f'{u.a_rate:.3f} - {u.b_rate:.3f} = {u.diff:+.3f} [{u.ci[0]:+.3f}, {u.ci[1]:+.3f}], Fisher p {u.p:.3g}, '
            f'MDE {mde_text(u.mde)} (n {u.n_a} / {u.n_b})')

PAIRED_HEAD = ['[95% CI]', 'McNemar p (only / only)', 'MDE', 'n']

def paired_cells(by_seed:dict) -> list[str]:
    "Paired success pooled over seeds, stratified by seed: diff [lo, hi], McNemar p (only/only), MDE, n."
    p = pooled_paired(by_seed)['pooled']
    return [f'{p.diff:+.3f} [{p.ci[0]:+.3f}, {p.ci[1]:+.3f}]', f'{p.p:.3g} ({p.a_only}/{p.b_only})', mde_text(p.mde),
            str(p.n)]

def table(head:list[str], rows:list[list]) -> list[str]:
    return ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head), *('| ' + ' | '.join(map(str, r)) + ' |' for r in rows)]

def counts(t:pd.DataFrame, rate_col:str, n_col:str) -> pd.Series:
    "The successes behind a rate column: rate x n, rounded (a table's rates are k / n)."
    return (t[rate_col] * t[n_col]).round().astype(int)

def read_jsonl(p:Path) -> list[dict]:
    "`cove.core.read_jsonl` (a torn last line skipped, with a warning), but a missing file is an error, not no records."
    if not p.is_file(): raise FileNotFoundError(f'{p}: missing')
    return core.read_jsonl(p)

# --- the notebooks -----------------------------------------------------------------------------------------------------

@pooled('api_renaming')
def api_renaming(seeds:dict) -> list[str]:
    "Success and API-call correctness per arm and split; the unpaired comparisons of Claims rows 1, 3 and 5."
    tabs = []
    for d in seeds.values():
        t = pd.read_csv(d/'table.csv')
        tabs.append(t.assign(k=counts(t, 'success', 'n'), k_api=counts(t, 'api_correct', 'n_api')))
    tot = pd.concat(tabs).groupby(['arm', 'split'], sort=False)[['n', 'k', 'n_api', 'k_api']].sum()
    out = table(['arm', 'split', 'success', 'API call correct'],
                [[a, s, rate(r.k, r.n), rate(r.k_api, r.n_api)] for (a, s), r in tot.iterrows()])
    std_r, std_s = ('standard', 'renamed'), ('standard', 'same')
    anti_r, anti_s = ('anti-recitation', 'renamed'), ('anti-recitation', 'same')
    wanted = [('success, standard: renamed - same', std_r, std_s, 'k', 'n'),
              ('API correct, standard: renamed - same', std_r, std_s, 'k_api', 'n_api'),
              ('API correct, renamed: anti-recitation - standard', anti_r, std_r, 'k_api', 'n_api'),
              ('API correct, anti-recitation: renamed - same', anti_r, anti_s, 'k_api', 'n_api'),
              ('API correct, same: anti-recitation - standard', anti_s, std_s, 'k_api', 'n_api'),
              ('API correct, base: renamed - same', ('base', 'renamed'), ('base', 'same'), 'k_api', 'n_api')]
    out += ['', 'Unpaired (the two splits are different tasks; on one split the arms are paired: paired_pooled.md):', '']
    out += table(['comparison', 'a - b'], [
        [name, unpaired_text(tot.loc[a, k], tot.loc[a, n], tot.loc[b, k], tot.loc[b, n])]
        for name, a, b, k, n in wanted if a in tot.index and b in tot.index])
    fails = [pd.read_csv(d/'failures.csv') for d in seeds.values() if (d/'failures.csv').exists()]
    if fails:
        f = pd.concat(fails).groupby(['arm', 'split'], sort=False).sum(numeric_only=True)
        out += ['', 'Failure categories summed over the seeds:', '',
                *table(['arm', 'split', *f.columns], [[*i, *r] for i, r in zip(f.index, f.values.tolist())])]
        out += ['', 'On `renamed`, each kind as a share of the arm\'s failures (every episode not a success):', '']
        kinds = [c for c in f.columns if c != 'success']
        ren = {a: f.loc[(a, 'renamed')] for a in ('standard', 'anti-recitation')}
        n = {a: int(r[kinds].sum()) for a, r in ren.items()}
        out += table(['kind', *(f'{a} (of {n[a]})' for a in ren), 'standard - anti-recitation'],
                     [[k, *(rate(r[k], n[a]) for a, r in ren.items()),
                       unpaired_text(ren['standard'][k], n['standard'], ren['anti-recitation'][k], n['anti-recitation'])]
                      for k in kinds if n['standard'] and n['anti-recitation']])
    return out

@pooled('memrl_epochs')
def memrl_epochs(seeds:dict) -> list[str]:
    "SR, CSR and FR per variant and transfer success, summed over seeds; FR compared unpaired (its n is each arm's)."
    tabs = []
    for d in seeds.values():
        t = pd.read_csv(d/'table.csv')
        tabs.append(t.assign(**{f'{m} k': counts(t, m, f'{m} n') for m in ('SR', 'CSR', 'FR')}))
    tot = pd.concat(tabs).groupby('variant', sort=False)[['SR k', 'SR n', 'CSR k', 'CSR n', 'FR k', 'FR n']].sum()
    out = table(['variant', 'SR (last epoch)', 'CSR', 'FR'],
                [[v, rate(r['SR k'], r['SR n']), rate(r['CSR k'], r['CSR n']), rate(r['FR k'], r['FR n'])]
                 for v, r in tot.iterrows()])
    trs = [pd.read_csv(d/'transfer.csv') for d in seeds.values() if (d/'transfer.csv').exists()]
    if trs:
        tt = pd.concat([t.assign(k=counts(t, 'success', 'success n')) for t in trs])
        tt = tt.groupby('variant', sort=False)[['k', 'success n']].sum()
        out += ['', *table(['variant', 'transfer success'], [[v, rate(r.k, r['success n'])] for v, r in tt.iterrows()])]
    fr = [[f'FR {a} - {b}', unpaired_text(tot.loc[a, 'FR k'], tot.loc[a, 'FR n'], tot.loc[b, 'FR k'], tot.loc[b, 'FR n'])]
          for a, b in (('memrl', 'evo_memory'), ('memrl', 'base')) if a in tot.index and b in tot.index]
    if fr: out += ['', 'Forgetting rate, unpaired (its n is each variant\'s own solved tasks):', '',
                   *table(['comparison', 'a - b'], fr)]
    return out

@pooled('attention_shift')
def attention_shift(seeds:dict) -> list[str]:
    "Per region, anti-recitation minus standard attention mass, paired per input over every seed's inputs (t)."
    ms = [json.loads((d/'metrics.json').read_text()) for d in seeds.values()]
    rows = []
    for i, reg in enumerate(r['region'] for r in ms[0]['table']):
        def mass(arm): return pd.concat([pd.Series([x[i] for x in m['masses'][arm]]) for m in ms], ignore_index=True)
        a, s = mass('anti_recitation'), mass('standard')
        d = a - s
        lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        rows.append([reg, len(d), f'{s.mean():.5f}', f'{a.mean():.5f}', f'{d.mean():+.5f} [{lo:+.5f}, {hi:+.5f}]',
                     f'{stats.ttest_1samp(d, 0).pvalue:.3g}', f'{(d > 0).mean():.3f}'])
    return table(['region', 'inputs', 'standard', 'anti-recitation', 'anti - standard [95% t CI]', 't-test p',
                  'share > 0'], rows)

@pooled('calibration')
def calibration(seeds:dict) -> list[str]:
    "Success per family at 0 and 2 worked examples, and 2-shot minus 0-shot paired over the same tasks."
    recs = {s: read_jsonl(d/'episodes.jsonl') for s, d in seeds.items()}
    rows = []
    for f in dict.fromkeys(r['family'] for rs in recs.values() for r in rs):
        cell = {}
        for shots in (0, 2):
            xs = [r['success'] for rs in recs.values() for r in rs if r['family'] == f and r['shots'] == shots]
            cell[shots] = rate(sum(xs), len(xs))
        by = {}
        for s, rs in recs.items():
            two = {r['task_id']: int(r['success']) for r in rs if r['family'] == f and r['shots'] == 2}
            zero = {r['task_id']: int(r['success']) for r in rs if r['family'] == f and r['shots'] == 0}
            ids = [t for t in zero if t in two]
            by[s] = ([two[t] for t in ids], [zero[t] for t in ids])
        rows.append([f'`{f}`', cell[0], cell[2], *paired_cells(by)])
    return table(['family', '0 shots', '2 shots', '2 - 0 ' + PAIRED_HEAD[0], *PAIRED_HEAD[1:]], rows)

@pooled('harness_limits')
def harness_limits(seeds:dict) -> list[str]:
    "k = 8 against k = 2 paired over the same tasks; syntax errors and failures of stage 2 against stage 1 (unpaired)."
    eps = pd.concat([pd.read_csv(d/'episodes_by_category.csv').assign(seed=s) for s, d in seeds.items()])
    out = []
    for ds in sorted(eps.dataset.unique()):
        by = {}
        for s in seeds:
            e = eps[(eps.seed == s) & (eps.dataset == ds)]
            a = (e[e.k == 8].sort_values('episode').status == 'success').astype(int).tolist()
            b = (e[e.k == 2].sort_values('episode').status == 'success').astype(int).tolist()
            if a and b: by[s] = (a, b)
        e2 = eps[(eps.dataset == ds) & (eps.k == 2)]
        x1, x2 = e2[e2.stage == 1], e2[e2.stage == 2]
        out += [f'**{ds}**', '']
        if by: out += ['k = 8 - k = 2, paired: ' + ', '.join(f'{h} {c}' for h, c in zip(['diff', *PAIRED_HEAD[1:]], paired_cells(by))), '']
        out += table(['at k = 2', 'stage 1', 'stage 2', 'stage 2 - stage 1'], [
            ['syntax error', rate((x1.category == 'syntax').sum(), len(x1)), rate((x2.category == 'syntax').sum(), len(x2)),
             unpaired_text((x2.category == 'syntax').sum(), len(x2), (x1.category == 'syntax').sum(), len(x1))],
            ['not solved', rate((x1.status != 'success').sum(), len(x1)), rate((x2.status != 'success').sum(), len(x2)),
             unpaired_text((x2.status != 'success').sum(), len(x2), (x1.status != 'success').sum(), len(x1))]])
        out += ['']
    return out

@pooled('learning_curve')
def learning_curve(seeds:dict) -> list[str]:
    "Success per checkpoint over the seeds, and each checkpoint against step 0 paired over the same tasks."
    out = {}
    for s, d in seeds.items():
        by = defaultdict(dict)
        for r in read_jsonl(d/'outcomes.jsonl'):
            by[r.get('setting'), r['step']].update(zip(r['task_ids'], map(int, r['success'])))
        out[s] = by
    keys = sorted({k for by in out.values() for k in by}, key=lambda k: (k[1], str(k[0])))
    base = next(k for k in keys if k[1] == 0)
    rows = []
    for k in keys:
        succ, n = sum(sum(by[k].values()) for by in out.values()), sum(len(by[k]) for by in out.values())
        vs = (paired_cells({s: ([by[k][t] for t in by[base]], list(by[base].values())) for s, by in out.items()})
              if k != base else ['—'] * 4)
        rows.append([k[0] or 'base', k[1], rate(succ, n), *vs])
    return table(['setting', 'step', 'success', 'vs step 0 ' + PAIRED_HEAD[0], *PAIRED_HEAD[1:]], rows)

@pooled('router_pareto')
def router_pareto(seeds:dict) -> list[str]:
    """Per router: success, parametric share and Token/Inst. over the seeds' episodes summed; the channel shares per
    family."""
    from cove.llm import MODELLED_TOKENS_PER_INSTANCE as TOK
    tabs = [pd.read_csv(d/'table.csv') for d in seeds.values()]
    t = pd.concat([x[x.status == 'ok'].assign(k=counts(x[x.status == 'ok'], 'success', 'n')) for x in tabs])
    tot = t.groupby('method', sort=False)[['k', 'n', 'routed', 'n_param', 'train_tokens', 'updates']].sum()
    ref = tot.n_param['always_both'] / tot.routed['always_both'] if 'always_both' in tot.index else None
    rows = [[m, rate(r.k, r.n), rate(r.n_param, r.routed), f'{TOK * r.n_param / r.routed:.0f}',
             f'{r.n_param / r.routed / ref:.2f}' if ref else '—', int(r.train_tokens), int(r.updates)]
            for m, r in tot.iterrows()]
    out = table(['router', 'success', 'parametric share of routed', 'Token/Inst.', 'Rel. (vs always_both)',
                 'training tokens (sum)', 'updates (sum)'], rows)
    sh = pd.concat([pd.read_csv(d/'router_shares.csv') for d in seeds.values()])
    chans = ['harness_only', 'parametric_candidate', 'hybrid']
    for c in chans: sh[c] = (sh[c] * sh.routed).round().astype(int)
    fam = sh.groupby(['method', 'family'], sort=False)[['routed', *chans]].sum()
    out += ['', 'Channel shares per family, episodes summed over the seeds (Wilson 95%):', '',
            *table(['router', 'family', *chans], [[m, f, *(rate(r[c], r.routed) for c in chans)]
                                                  for (m, f), r in fam.iterrows()])]
    return out

# --- writing -----------------------------------------------------------------------------------------------------------

def write_pooled(name:str, seed_dirs:dict, agg:Path) -> dict | None:
    "`agg/pooled.md` for notebook `name` (None where it has no function here); a failure is a one-line reason."
    if name not in POOLED: return None
    try: lines = POOLED[name]({s: Path(d) for s, d in sorted(seed_dirs.items())})
    except Exception as e: return dict(reason=f'{type(e).__name__}: {e}')
    head = (f'Pooled over seeds {", ".join(map(str, sorted(seed_dirs)))} by tools/pooled.py '
            f'({" ".join(POOLED[name].__doc__.split())})')
    (agg/'pooled.md').write_text('\n'.join([head, '', *lines]) + '\n')
    return dict(md='pooled.md', seeds=sorted(seed_dirs))

def ok_seeds(nb_dir:Path) -> dict:
    "The seed folders of a grid notebook whose cell finished ok (its cell.json says so)."
    out = {}
    for d in sorted(nb_dir.glob('seed*')):
        try: ok = json.loads((d/'cell.json').read_text()).get('status') == 'ok'
        except (OSError, ValueError): ok = False
        if ok and d.name[4:].isdigit(): out[int(d.name[4:])] = d
    return out

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('report', type=Path, help='a grid report folder, e.g. outputs/report/cpu')
    ap.add_argument('--only', default='', help='notebooks, comma-separated (default: every one in POOLED)')
    a = ap.parse_args(argv)
    names = [x for x in a.only.split(',') if x] or list(POOLED)
    if bad := [x for x in names if x not in POOLED]:
        raise SystemExit(f'--only {",".join(bad)}: no pooled figures for it (one of {", ".join(POOLED)})')
    if not a.report.is_dir(): raise SystemExit(f'{a.report}: not a folder')
    for nb in names:
        seeds = ok_seeds(a.report/nb)
        if not seeds:
            print(f'{nb}: no seed finished ok')
            continue
        (a.report/nb/'aggregate').mkdir(exist_ok=True)
        r = write_pooled(nb, seeds, a.report/nb/'aggregate')
        print(f'{nb}: ' + (r['reason'] if 'reason' in r else f"{nb}/aggregate/pooled.md (seeds {r['seeds']})"))
    return 0

if __name__ == '__main__': sys.exit(main())
