"""Issue 54, item 3: the demo's rollout engine is chosen by a measured probe, kept per machine and setting, under the
rule that the engine changes the time, never the results. The engines' plays are stood in for here (`_probe_play`:
transcripts and seconds); what is tested is the choice, the record kept and when it is measured again. The real play
runs in nbs/09_bench.ipynb on the tiny model."""
import json
import pytest
import cove.bench as bench
from cove.config import load_config
from cove.serve import ServeError

@pytest.fixture
def engines(tmp_path, monkeypatch):
    "vLLM can run; each engine's play is `plays[engine]` (a `(transcripts, seconds)` or an exception); calls counted."
    monkeypatch.setattr(bench, 'probe_file', lambda: tmp_path/'engine-probe.json')
    monkeypatch.setattr(bench, 'unservable', lambda cfg, venv=None: None)
    plays, calls = {}, []
    def play(cfg, b, folder, n, k):
        calls.append(b)
        if isinstance(plays[b], Exception): raise plays[b]
        return plays[b]
    monkeypatch.setattr(bench, '_probe_play', play)
    return plays, calls, tmp_path/'engine-probe.json'

_cfg = lambda dtype='float32': load_config(env={}, overrides={'model.dtype': dtype})

def test_the_fastest_engine_with_the_same_transcripts_is_chosen_and_kept(engines):
    plays, calls, f = engines
    plays.update(hf=(['a', 'b'], 2.0), vllm=(['a', 'b'], 0.5))
    r = bench.engine_probe(_cfg())
    assert (r['engine'], r['measured'], r['cached'], r['same_transcripts']['vllm']) == ('vllm', True, False, '2 of 2')
    assert r['episodes_per_min'] == {'hf': 60.0, 'vllm': 240.0} and calls == ['hf', 'vllm']
    assert list(json.loads(f.read_text()).values())[0]['engine'] == 'vllm'
    again = bench.engine_probe(_cfg())   # the same machine and setting: the record, nothing played
    assert (again['engine'], again['cached'], calls) == ('vllm', True, ['hf', 'vllm'])
    bench.engine_probe(_cfg(), refresh=True)
    assert calls == ['hf', 'vllm'] * 2
    bench.engine_probe(_cfg('bfloat16'))   # another dtype: another key, measured
    assert calls == ['hf', 'vllm'] * 3 and len(json.loads(f.read_text())) == 2

def test_an_engine_with_other_transcripts_is_not_chosen(engines):
    plays, _, _ = engines
    plays.update(hf=(['a', 'b'], 2.0), vllm=(['a', 'c'], 0.5))
    r = bench.engine_probe(_cfg())
    assert r['engine'] == 'hf' and r['same_transcripts']['vllm'] == '1 of 2' and '1 of 2 transcripts' in r['why']

def test_an_engine_that_fails_is_said_and_nothing_is_kept(engines):
    plays, _, f = engines
    plays.update(hf=(['a'], 1.0), vllm=ServeError('the vLLM server exited (code 3)'))
    r = bench.engine_probe(_cfg())
    assert r['engine'] == 'hf' and 'vllm failed: ServeError: the vLLM server exited' in r['why']
    assert not f.exists() and r['file'] is None

def test_only_hf_is_not_measured(engines, monkeypatch):
    plays, calls, f = engines
    monkeypatch.setattr(bench, 'unservable', lambda cfg, venv=None: 'vLLM is not installed: run `make vllm`')
    r = bench.engine_probe(_cfg())
    assert (r['engine'], r['measured'], calls) == ('hf', False, []) and 'make vllm' in r['why'] and not f.exists()

def test_a_corrupt_record_file_is_measured_again(engines, caplog):
    plays, calls, f = engines
    f.write_text('{not json')
    plays.update(hf=(['a'], 1.0), vllm=(['a'], 0.5))
    assert bench.engine_probe(_cfg())['engine'] == 'vllm' and calls == ['hf', 'vllm']
    assert 'holds no engine probe records' in caplog.text and len(json.loads(f.read_text())) == 1

def test_a_record_that_cannot_be_kept_is_said_and_the_choice_stands(engines, monkeypatch, tmp_path, caplog):
    plays, _, _ = engines
    (tmp_path/'a-file').write_text('')
    monkeypatch.setattr(bench, 'probe_file', lambda: tmp_path/'a-file'/'engine-probe.json')   # its folder is a file
    plays.update(hf=(['a'], 1.0), vllm=(['a'], 0.5))
    r = bench.engine_probe(_cfg())
    assert (r['engine'], r['file']) == ('vllm', None) and 'could not be kept' in caplog.text
