"""Every public function with valid input, and with bad input: a pnmem.Error (ArgumentError /
ArgumentTypeError for what Python refuses before C), never a crash."""
import dataclasses
import json
import os
import re
import shutil
import threading

import pnmem
import pytest
from conftest import FAKE_MEMINFO_TREE, GIB

BAD_INTS = [None, "1", 1.5, True, object()]
GOOD_JSON = ('{"format": "pnmem-model", "version": 1, "kv_bytes_per_token": 131072, '
             '"activation": {"fixed_bytes": "256MiB"}}')


def test_library_path_is_a_loaded_file():
    # libpnmem_c.so, or the file it links to (libpnmem_c.so.0.1.0: meson test names the real file)
    assert re.search(r"/libpnmem_c\.so(\.\d+)*$", pnmem.library_path), pnmem.library_path
    assert os.path.isfile(pnmem.library_path)


# --- admit ---------------------------------------------------------------------------------------

def test_admit_default_model(roomy_die):
    a = pnmem.admit(1024, pnmem.Model.reference())
    assert isinstance(a.status, pnmem.Status) and isinstance(a.reason, pnmem.Reason)
    assert a.status in (pnmem.Status.ADMITTED, pnmem.Status.CAPPED, pnmem.Status.DENIED)
    assert isinstance(a.level, pnmem.Level)
    assert a.need_bytes > 0
    line = a.explain()
    assert line.startswith(f"{a.status} ({a.reason}): ") and line == pnmem.explain(a)
    assert f"({a.need_bytes} B)" in line and line.endswith(f", level {a.level}")  # a request's words
    assert dataclasses.is_dataclass(a)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.fit_tokens = 1


def test_model_cost_never_set_is_refused(watcher):
    # Model() has no cost (as pnmem_model_init): every call refuses it, saying where a cost comes from,
    # instead of pricing the request as the seed's model (issue 28: ~600 MiB per 1500 tokens).
    m = pnmem.Model(kv=pnmem.KvFormat.F16, max_window=8192)
    assert m.normal_kv is None and m.full_kv_bytes_per_token == (0,) * pnmem.KV_FORMATS
    for call in (lambda: pnmem.admit(100, m), lambda: pnmem.admit_reserved(100, m),
                 lambda: pnmem.kv_allocation(pnmem.plan(pnmem.Level.OK, 1), 100, m),
                 lambda: pnmem.plan_eviction([1000], 1, m), lambda: pnmem.admit_after_eviction(100, [1000], m),
                 lambda: pnmem.Gate.for_model(m)):
        with pytest.raises(pnmem.ArgumentError, match=r"cost was never set .*Model\.from_hf_config\(path\).*"
                                                      r"Model\.reference\(\)"):
            call()
    with pytest.raises(TypeError):  # no model at all: Python's own error (the model is a required argument)
        pnmem.admit(100)  # type: ignore[call-arg]
    # What replaces the old default: the seed's model, by name.
    ref = pnmem.Model.reference(kv=pnmem.KvFormat.F16, max_window=8192)
    assert ref.normal_kv == pnmem.KvFormat.FP32 and ref.kv == pnmem.KvFormat.F16 and ref.max_window == 8192
    assert pnmem.admit(100, ref).need_bytes > 0
    with pytest.raises(pnmem.ArgumentTypeError, match="not a Model field: colour"):
        pnmem.Model.reference(colour=1)


def test_admit_gpu_resident_window_caps(roomy_die):
    m = pnmem.Model.reference(gpu_resident=True, max_window=1000, max_slots=4)
    a = pnmem.admit(5000, m)
    assert a.status == pnmem.Status.CAPPED and a.reason == pnmem.Reason.WINDOW and a.fit_tokens <= 1000
    assert a.admitted


@pytest.mark.parametrize("n", [-1, -(2 ** 31), 2 ** 31, 10 ** 30, None, "5", 5.0, True])
def test_admit_bad_tokens(watcher, n):
    with pytest.raises(pnmem.Error):
        pnmem.admit(n, pnmem.Model.reference())


@pytest.mark.parametrize("changes", [
    dict(die=-2), dict(die=pnmem.MAX_DIES), dict(die=None), dict(kv=7), dict(kv=-1), dict(kv="f16"),
    dict(normal_kv=99), dict(compact_kv=None), dict(max_window=2 ** 31), dict(max_slots="8"),
    dict(full_kv_bytes_per_token=(1, 2)), dict(full_kv_bytes_per_token=(-1,) * 7),
    dict(windows=((-1, (0,) * 7),)), dict(windows=((4096, (0,) * 6),)), dict(windows=((1, (0,) * 7),) * 5),
    dict(windows=((8192, (1,) * 7), (4096, (1,) * 7))), dict(kv_block_tokens=-1),
    dict(kv_bytes_per_encoder_item=(1,)), dict(state_bytes_per_seq=2 ** 64), dict(activation_fixed_bytes=1.0),
    dict(anchors=((1, 1),) * 9), dict(anchors=((1,),)), dict(anchors=((-1, 1),)), dict(anchors="x"),
    dict(gpu_resident="yes"),
])
def test_admit_bad_model_fields(watcher, changes):
    with pytest.raises(pnmem.Error):
        pnmem.admit(10, dataclasses.replace(pnmem.Model.reference(), **changes))


def test_admit_model_refused_by_c_carries_the_c_line(watcher):
    # Anchors whose tokens do not increase: only C checks it; its log line becomes the message.
    m = pnmem.Model.reference(anchors=((100, 1), (10, 2)))
    with pytest.raises(pnmem.Error, match=r"pnmem_admit: .*anchors\[1\]\.tokens is 10.*must increase") as e:
        pnmem.admit(10, m)
    assert e.value.function == "pnmem_admit"
    m = pnmem.Model.reference(anchors=((0, 1),), activation_fixed_bytes=5)
    with pytest.raises(pnmem.Error, match="not both"):
        pnmem.admit(10, m)


@pytest.mark.parametrize("model", ["model", 1, object(), pnmem.Model])
def test_admit_model_of_the_wrong_type(model):
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.admit(1, model)


def test_explain_bad_arguments():
    for bad in (None, "denied", 1, dataclasses.replace):
        with pytest.raises(pnmem.ArgumentTypeError):
            pnmem.explain(bad)


# --- models --------------------------------------------------------------------------------------

def test_model_defaults_are_the_seeds():
    m = pnmem.Model.reference()
    assert m.kv is None and m.die == -1 and m.max_slots == 1 and not m.gpu_resident
    assert m.request_kv == pnmem.KvFormat.FP32  # no kv given: the model's own format
    assert m.full_kv_bytes_per_token[pnmem.KvFormat.FP32] == 40960
    assert m.full_kv_bytes_per_token[pnmem.KvFormat.Q4] == 5898
    assert m.normal_kv == pnmem.KvFormat.FP32 and m.compact_kv == pnmem.KvFormat.Q4
    assert len(m.anchors) == 6 and m.anchors[0] == (0, 256 << 20)


def test_a_real_models_kv_is_priced_in_its_own_format():
    # Llama-3-8B's config.json: bf16, 32 layers x 8 KV heads x 128 dims, K and V: 131072 B a token. With no
    # kv given, Model, C and the tool price it in bf16 (Q4, Python's old default, was 3.5x too low).
    m = pnmem.Model.from_hf_config(os.path.join(FIXTURES, "llama-3-8b.config.json"))
    assert m.kv is None and m.normal_kv == pnmem.KvFormat.BF16 and m.request_kv == pnmem.KvFormat.BF16
    assert m.kv_bytes_per_token == 131072
    told = pnmem.Model.from_hf_config(os.path.join(FIXTURES, "llama-3-8b.config.json"), kv=pnmem.KvFormat.Q4_0)
    assert told.request_kv == pnmem.KvFormat.Q4_0 and told.kv_bytes_per_token == 36864  # 65536 values x 18 B / 32
    with pytest.raises(pnmem.ArgumentError, match="never set"):
        pnmem.Model().request_kv


def test_model_from_json():
    m = pnmem.Model.from_json(GOOD_JSON, kv=pnmem.KvFormat.F16, max_window=8192)
    assert m.kv == pnmem.KvFormat.F16 and m.max_window == 8192
    assert m.full_kv_bytes_per_token[pnmem.KvFormat.F16] == 131072
    assert m.anchors == () and m.activation_fixed_bytes == 256 << 20
    assert pnmem.Model.from_json(GOOD_JSON.encode()) == pnmem.Model.from_json(GOOD_JSON)


@pytest.mark.parametrize("text, message", [
    ("{bad", "not JSON"), ("", ""), ('{"format": "pnmem-model", "version": 3}', "version"),
    ("\0", ""),
])
def test_model_from_json_refused_with_the_c_message(text, message):
    with pytest.raises(pnmem.Error, match=r"pnmem_model_cost_from_json: .*" + message) as e:
        pnmem.Model.from_json(text)
    assert e.value.function == "pnmem_model_cost_from_json"
    assert len(str(e.value)) > len("pnmem_model_cost_from_json: ")


def test_model_from_json_bad_arguments():
    for bad in (None, 1, ["{}"]):
        with pytest.raises(pnmem.ArgumentTypeError):
            pnmem.Model.from_json(bad)
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.Model.from_json(GOOD_JSON, windows=())  # a cost field, not a request one
    with pytest.raises(pnmem.ArgumentError):
        pnmem.Model.from_json(GOOD_JSON, die=99)


# --- plan and kv_allocation ---------------------------------------------------------------------

def test_plan_every_level():
    plans = {lv: pnmem.plan(lv, 8, 16384) for lv in pnmem.Level}
    assert plans[pnmem.Level.OK].max_slots == 8 and not plans[pnmem.Level.OK].degraded
    assert plans[pnmem.Level.WATCH].force_kv_q4
    assert plans[pnmem.Level.TIGHT].max_slots == 4 and plans[pnmem.Level.TIGHT].prefill_window == 8192
    assert plans[pnmem.Level.CRITICAL].max_slots == 1 and plans[pnmem.Level.CRITICAL].kv_evict
    assert "critical" in plans[pnmem.Level.CRITICAL].note
    assert pnmem.plan(2, 8).level == pnmem.Level.TIGHT  # an int level
    assert pnmem.plan(pnmem.Level.OK, -(2 ** 31), -(2 ** 31)).max_slots == 1  # C defines every int


@pytest.mark.parametrize("args", [(4,), (-1,), (None,), ("ok",), (1.0,), (0, 2 ** 31), (0, 1, "x"), (0, 1, 0, "q")])
def test_plan_bad_arguments(args):
    with pytest.raises(pnmem.Error):
        pnmem.plan(*args)


def test_kv_allocation():
    m = pnmem.Model.reference(kv=pnmem.KvFormat.FP32)
    ok = pnmem.kv_allocation(pnmem.plan(pnmem.Level.OK, 1), 1000, m)
    assert ok.format == pnmem.KvFormat.FP32 and ok.bytes == 1000 * 40960
    watch = pnmem.kv_allocation(pnmem.plan(pnmem.Level.WATCH, 1), 1000, m)
    assert watch.format == pnmem.KvFormat.Q4 and watch.bytes == 1000 * 5898
    assert pnmem.kv_allocation(pnmem.plan(pnmem.Level.OK, 1), 0, m).bytes == 0


def test_kv_allocation_bad_arguments():
    p = pnmem.plan(pnmem.Level.OK, 1)
    r = pnmem.Model.reference()
    for args in ((None, 1, r), ("plan", 1, r), (p, -1, r), (p, 2 ** 64, r), (p, None, r), (p, 1, "m"), (p, 1, None),
                 (p, 1, pnmem.Model()), (p, 1, pnmem.Model.reference(die=-5))):
        with pytest.raises(pnmem.Error):
            pnmem.kv_allocation(*args)


# --- model loads -------------------------------------------------------------------------------

def test_model_load_checks(watcher):
    pnmem.set_die(0, 2 * GIB, 16 * GIB, 14 * GIB, 0)
    try:
        a = pnmem.admit_model_load(GIB, GIB)  # 1 + 1 + 1.5 GiB scratch > 2 GiB free - 1 GiB reserve
        assert a.status == pnmem.Status.DENIED and a.reason == pnmem.Reason.DIE_VRAM and a.die == 0
        assert a.need_bytes == 7 * GIB // 2
        assert pnmem.admit_model_load(0, 0, die=0).status == pnmem.Status.DENIED
        a = pnmem.admit_model_load_die(0, 0, 0)  # the 1.5 GiB scratch > 2 GiB free - 1 GiB reserve, as a whole load
        assert a.status == pnmem.Status.DENIED and a.reason == pnmem.Reason.DIE_VRAM and a.limit_bytes == GIB
        pnmem.set_die(0, 3 * GIB, 16 * GIB, 13 * GIB, 0)
        a = pnmem.admit_model_load_die(0, 0, 0)  # 1.5 GiB in 3 - 1 GiB
        assert a.status == pnmem.Status.ADMITTED and a.reason == pnmem.Reason.FITS and a.limit_bytes == 2 * GIB
        assert pnmem.admit_model_load_die(0, 0, 1).reason == pnmem.Reason.BAD_REQUEST  # not fed
        spike = pnmem.admit_load_spike()
        assert spike.status in (pnmem.Status.ADMITTED, pnmem.Status.DENIED) and spike.need_bytes > 0
        assert spike.explain().startswith(f"{spike.status} ({spike.reason}): the load's host spike, ")
    finally:
        pnmem.set_die(0, 16 * GIB, 16 * GIB, 0, 0)


@pytest.mark.parametrize("fn", [pnmem.admit_model_load, pnmem.admit_model_load_die])
@pytest.mark.parametrize("args", [(-1, 0, 0), (0, -1, 0), (0, 0, -2), (0, 0, pnmem.MAX_DIES), (None, 0, 0),
                                  (0, 0, "0"), (2 ** 64, 0, 0), (1.0, 0, 0)])
def test_model_load_bad_arguments(fn, args):
    with pytest.raises(pnmem.Error):
        fn(*args)


# --- dies, policy, budget, log sink -------------------------------------------------------------

@pytest.mark.parametrize("args", [(-1, 1, 1), (pnmem.MAX_DIES, 1, 1), (0, -1, 1), (0, 1, 2 ** 64), (None, 1, 1),
                                  (0, 1.0, 1), (0, 1, 1, "0"), (0, 1, 1, 0, -5)])
def test_set_die_bad_arguments(args):
    with pytest.raises(pnmem.Error):
        pnmem.set_die(*args)


def test_policy_is_the_environments():
    p = pnmem.policy()
    assert p.host_reserve_min_bytes == 1 and p.host_reserve_bp == 0  # PN_HOST_RESERVE_BYTES=1
    assert p.psi_full_reject_bp == 10000  # PN_PSI_FULL_REJECT=100
    assert p.die_tight_divisor == 16 and p.die_scratch_bytes == 3 * GIB // 2
    assert p.ladder_disabled is False


def test_budget(watcher):
    b = pnmem.budget()
    assert b.total_bytes > 0 and b.avail_bytes <= b.total_bytes
    assert b.headroom_bytes == max(0, b.avail_bytes - b.reserve_bytes)
    assert isinstance(b.level, pnmem.Level) and b.seq >= 1


def test_log_sink_receives_lines_on_the_calling_thread(watcher):
    got = []
    pnmem.set_log_sink(lambda line: got.append((threading.get_ident(), line)))
    try:
        with pytest.raises(pnmem.Error):
            pnmem.admit(1, pnmem.Model.reference(anchors=((2, 1), (1, 1))))
    finally:
        pnmem.set_log_sink()
    assert got and got[-1][0] == threading.get_ident() and "pnmem: pnmem_admit: model->anchors" in got[-1][1]


def test_log_sink_that_raises_does_not_crash(watcher, capsys):
    def bad(line):
        raise RuntimeError("sink broke")
    pnmem.set_log_sink(bad)
    try:
        with pytest.raises(pnmem.Error, match="must increase"):
            pnmem.admit(1, pnmem.Model.reference(anchors=((2, 1), (1, 1))))
    finally:
        pnmem.set_log_sink()
    assert "sink broke" in capsys.readouterr().err


def test_log_sink_none_and_bad():
    pnmem.set_log_sink(None)
    try:
        with pytest.raises(pnmem.Error, match="must increase"):  # the line still travels in the Error
            pnmem.admit(1, pnmem.Model.reference(anchors=((2, 1), (1, 1))))
    finally:
        pnmem.set_log_sink()
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.set_log_sink("stderr")


# --- models from the files engines load (issue 23) ----------------------------------------------

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "models")


def fixture(name):
    return os.path.join(FIXTURES, name)


def test_from_hf_config_prices_mla_as_one_latent_row():
    # DeepSeek-V3: 61 layers x (512 + 64) values x 2 B in bf16.
    m = pnmem.Model.from_hf_config(fixture("deepseek-v3.config.json"), kv=pnmem.KvFormat.BF16)
    assert m.full_kv_bytes_per_token[pnmem.KvFormat.BF16] == 70272
    assert m.kv_bytes_per_token == 70272
    assert m.windows == () and m.state_bytes_per_seq == 0
    assert m.kv == pnmem.KvFormat.BF16 and m.normal_kv == pnmem.KvFormat.BF16


def test_from_hf_config_reads_a_model_directory(tmp_path):
    # vLLM's model path is a downloaded snapshot's directory: its config.json is the model's.
    shutil.copy(fixture("qwen3-next-80b-a3b-thinking.config.json"), tmp_path / "config.json")
    from_dir = pnmem.Model.from_hf_config(tmp_path, engine="vllm")
    assert from_dir == pnmem.Model.from_hf_config(tmp_path / "config.json", engine="vllm")
    assert from_dir.kv_block_tokens == 544 and from_dir.state_bytes_per_seq == 36 * 544 * 2048
    assert pnmem.Model.from_hf_config(str(tmp_path) + "/") == pnmem.Model.from_hf_config(tmp_path)


def test_from_hf_config_under_each_engine():
    path = fixture("qwen3-next-80b-a3b-thinking.config.json")
    exact = pnmem.Model.from_hf_config(path)
    assert exact.state_bytes_per_seq == 36 * (24576 + 524288) * 2
    assert exact.kv_block_tokens == 0
    vllm = pnmem.Model.from_hf_config(path, engine="vllm")
    assert vllm.kv_block_tokens == 544 and vllm.state_bytes_per_seq == 36 * 544 * 2048
    assert pnmem.Model.from_hf_config(path, engine=pnmem.Engine.LLAMA_CPP).state_bytes_per_seq == 79036416
    twice = pnmem.Model.from_hf_config(path, engine=pnmem.EngineRule(engine=pnmem.Engine.VLLM, state_copies=2))
    assert twice.state_bytes_per_seq == 2 * vllm.state_bytes_per_seq
    gemma = pnmem.Model.from_hf_config(fixture("gemma-3-27b-it.config.json"), engine="llama.cpp")
    assert [w[0] for w in gemma.windows] == [1536]  # pad256(1024 + 512)
    assert str(pnmem.Engine.LLAMA_CPP) == "llama.cpp"


def test_from_hf_config_mtp_layers():
    # The rule's mtp: DeepSeek-V3's one MTP layer is a 62nd latent row (C++, C and the CLI say the same).
    path = fixture("deepseek-v3.config.json")
    assert pnmem.EngineRule().mtp is False
    plain = pnmem.Model.from_hf_config(path, engine="vllm")
    mtp = pnmem.Model.from_hf_config(path, engine=pnmem.EngineRule(engine=pnmem.Engine.VLLM, mtp=True))
    assert plain.kv_bytes_per_token == 61 * 1152
    assert mtp.kv_bytes_per_token == 62 * 1152
    with pytest.raises(pnmem.Error, match=r"num_nextn_predict_layers: 0: the model has no MTP layers"):
        pnmem.Model.from_hf_config(fixture("kimi-k2-instruct.config.json"), engine=pnmem.EngineRule(mtp=True))
    with pytest.raises(pnmem.Error, match="mtp is for the vllm and exact rules"):
        pnmem.Model.from_hf_config(path, engine=pnmem.EngineRule(engine=pnmem.Engine.LLAMA_CPP, mtp=True))
    with pytest.raises(pnmem.ArgumentTypeError, match="engine.mtp must be a bool"):
        pnmem.Model.from_hf_config(path, engine=pnmem.EngineRule(mtp="yes"))


def test_from_hf_config_hybrid_manager_off():
    # vLLM with its hybrid KV-cache manager off: Gemma-3-27B's 52 sliding layers hold the whole context.
    path = fixture("gemma-3-27b-it.config.json")
    assert pnmem.EngineRule().hybrid_manager_off is False
    off = pnmem.Model.from_hf_config(path, engine=pnmem.EngineRule(engine=pnmem.Engine.VLLM, hybrid_manager_off=True))
    assert off.windows == () and off.kv_bytes_per_token == 62 * 8192
    assert pnmem.Model.from_hf_config(path, engine="vllm").windows != ()
    with pytest.raises(pnmem.Error, match="hybrid_manager_off is for the vllm rule"):
        pnmem.Model.from_hf_config(path, engine=pnmem.EngineRule(hybrid_manager_off=True))


def test_from_hf_config_errors_name_the_key(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "brand_new", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 256}')
    with pytest.raises(pnmem.Error, match=r"pnmem_model_cost_from_hf_config_file: .*config\.json: head_dim: missing") as e:
        pnmem.Model.from_hf_config(bad)
    assert e.value.function == "pnmem_model_cost_from_hf_config_file"
    with pytest.raises(pnmem.Error, match=r"pnmem_model_cost_from_hf_config_file: .*config\.json: head_dim: missing"):
        pnmem.Model.from_hf_config(tmp_path)  # the model's directory: its config.json
    with pytest.raises(pnmem.Error, match=r"nope\.json"):
        pnmem.Model.from_hf_config(tmp_path / "nope.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(pnmem.Error, match=r"empty/config\.json: No such file"):
        pnmem.Model.from_hf_config(tmp_path / "empty")
    with pytest.raises(pnmem.ArgumentError, match="engine \"sglang\""):
        pnmem.Model.from_hf_config(fixture("llama-3-8b.config.json"), engine="sglang")
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.Model.from_hf_config(fixture("llama-3-8b.config.json"), engine=3.5)
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.Model.from_hf_config(None)
    with pytest.raises(pnmem.Error, match="seqs is 0"):
        pnmem.Model.from_hf_config(fixture("llama-3-8b.config.json"),
                                   engine=pnmem.EngineRule(engine=pnmem.Engine.LLAMA_CPP, seqs=0))


def test_from_gguf_reads_a_header(tmp_path):
    with pytest.raises(pnmem.Error, match="pnmem_model_cost_from_gguf_file: .*missing.gguf"):
        pnmem.Model.from_gguf(tmp_path / "missing.gguf")


def test_windows_round_trip_through_c_and_admit_with_images(watcher):
    m = pnmem.Model.from_hf_config(fixture("llama-3.2-90b-vision-instruct.config.json"), kv=pnmem.KvFormat.BF16)
    per_image = 20 * 4096 * 6404
    assert m.kv_bytes_per_encoder_item[pnmem.KvFormat.BF16] == per_image
    g = pnmem.Model.from_hf_config(fixture("gemma-2-9b.config.json"), kv=pnmem.KvFormat.BF16)
    assert [w[0] for w in g.windows] == [4096]
    again = dataclasses.replace(g)
    assert again._to_c("x").sliding_window == 4096
    a = pnmem.admit(1000, m, encoder_items=2)
    b = pnmem.admit(1000, m)
    if a.need_bytes and b.need_bytes:  # host path answers carry the need
        assert a.need_bytes - b.need_bytes == 2 * per_image
    with pytest.raises(pnmem.Error):
        pnmem.admit(10, m, encoder_items=-1)
    with pnmem.admit_reserved(100, m, encoder_items=1) as r:
        assert r.answer.status in (pnmem.Status.ADMITTED, pnmem.Status.CAPPED, pnmem.Status.FAIL_OPEN,
                                   pnmem.Status.DENIED)


# --- Rung 4b: KV eviction ------------------------------------------------------------------------

def _llama_f16():
    """Llama-3-8B's KV in f16 (128 KiB per token, every format alike here) and no activation term."""
    return pnmem.Model(kv=pnmem.KvFormat.F16, normal_kv=pnmem.KvFormat.F16,
                       full_kv_bytes_per_token=(131072,) * pnmem.KV_FORMATS, windows=(), anchors=(),
                       activation_fixed_bytes=0, activation_per_token_bytes=0, activation_per_token_sq_bytes=0)


def test_select_keep_sinks_recent_and_the_best_scores():
    scores = [0.0] * 20
    scores[5], scores[11], scores[3], scores[16] = 9, 8, 7, 6
    assert pnmem.select_keep(scores, 8, sinks=2, recent=2) == [0, 1, 3, 5, 11, 16, 18, 19]
    assert pnmem.select_keep(None, 8, n_tokens=20, sinks=2, recent=2) == [0, 1, 14, 15, 16, 17, 18, 19]
    assert pnmem.select_keep([1.0] * 12, 6, sinks=1, recent=1) == [0, 1, 2, 3, 4, 11]  # ties: the earlier
    assert pnmem.select_keep([3, 1, 2], 5) == [0, 1, 2]
    assert pnmem.select_keep([3, 1, 2], -1) == []
    with pytest.raises(pnmem.ArgumentError):
        pnmem.select_keep(None, 4)  # no scores and no length
    with pytest.raises(pnmem.ArgumentError):
        pnmem.select_keep([1, 2], 1, n_tokens=3)
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.select_keep(["x"], 1)
    for bad in BAD_INTS:
        with pytest.raises((pnmem.ArgumentError, pnmem.ArgumentTypeError)):
            pnmem.select_keep([1.0], bad)


def test_observation_and_key_norm_scores():
    attn = [[0.1, 0, 0, 0.5, 0, 0, 0.4], [0.2, 0.1, 0, 0.3, 0, 0.2, 0.2]]
    assert pnmem.observation_scores(attn, kernel=1) == pytest.approx([0.3, 0.1, 0.0, 0.8, 0.0, 0.2, 0.6])
    assert pnmem.observation_scores(attn, kernel=3) == pytest.approx([0.3, 0.3, 0.8, 0.8, 0.8, 0.6, 0.6])
    assert pnmem.key_norm_scores([[3, 4], [0, 1], [1, 1]]) == [-25.0, -1.0, -2.0]
    with pytest.raises(pnmem.ArgumentError):
        pnmem.observation_scores([[1, 2], [3]])
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.key_norm_scores(5)


def test_plan_eviction_cuts_the_longest_slots_first():
    # 2 GiB of Llama f16 is 16384 tokens: the 32768 and 20000 slots cut to (52768 - 16384) / 2 = 18192.
    e = pnmem.plan_eviction([32768, 8192, 1000, 20000], 2 * GIB, _llama_f16())
    assert e.enough and e.freed_bytes == 2 * GIB and e.cut_to_tokens == 18192 and e.slots_cut == 2
    assert e.slots[0] == pnmem.SlotEviction(32768, 18192, (32768 - 18192) * 131072)
    assert e.slots[1] == pnmem.SlotEviction(8192, 8192, 0)
    most = pnmem.plan_eviction([32768], 2 ** 64 - 1, _llama_f16(), min_keep_tokens=0, min_keep_permille=500)
    assert not most.enough and most.slots[0].keep_tokens == 16384
    with pytest.raises(pnmem.ArgumentError):
        pnmem.plan_eviction([-1], GIB, _llama_f16())
    with pytest.raises(pnmem.ArgumentError):
        pnmem.plan_eviction([10], -1, _llama_f16())
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.plan_eviction(7, GIB, _llama_f16())


EVICT_ON_A_TREE = FAKE_MEMINFO_TREE + """
import pnmem
m = pnmem.Model(kv=pnmem.KvFormat.F16, normal_kv=pnmem.KvFormat.F16,
                full_kv_bytes_per_token=(131072,) * pnmem.KV_FORMATS, windows=(), anchors=(),
                activation_fixed_bytes=0, activation_per_token_bytes=0, activation_per_token_sq_bytes=0)
write(6291456)  # 6 GiB of 8 available: OK
w = pnmem.Watcher(root=root, poll_interval_ms=3600000, pressure_poll_interval_ms=3600000).start()
a, e = pnmem.admit_after_eviction(1000, [32768, 100], m)
print(a.status, e.considered, e.slots[0] == pnmem.SlotEviction(32768, 32768, 0))
write(1310720 + 51200)  # 1.25 GiB + 50 MiB: TIGHT, 1000 tokens (125 MiB) do not fit above the reserve
pnmem.poll_now()
a, e = pnmem.admit_after_eviction(1000, [32768, 100], m)
print(a.level, a.status, e.considered, e.after_eviction, e.evict_bytes > 0, e.slots[0].keep_tokens < 32768)
"""


def test_admit_after_eviction_answers_with_the_admission(roomy_die):
    a, e = pnmem.admit_after_eviction(1000, [32768, 100], _llama_f16())
    assert isinstance(a, pnmem.Answer) and isinstance(e, pnmem.Eviction)
    with pytest.raises(pnmem.ArgumentError):
        pnmem.admit_after_eviction(-1, [1], _llama_f16())
    # On a box the test makes (a child over a tree), not on whatever this box is doing: at OK admitted and
    # nothing considered; at TIGHT refused or capped, and admitted after evicting from the long slot.
    from conftest import run_default_policy_child

    p = run_default_policy_child(EVICT_ON_A_TREE)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.split("\n")
    assert lines[0] == "admitted False True", p.stdout
    level, status, considered, after, evicts, cut = lines[1].split()
    assert (level, considered, after, evicts, cut) == ("tight", "True", "True", "True", "True"), p.stdout
    assert status in ("capped", "denied"), p.stdout


def test_preallocated_model_costs_nothing_per_request(watcher):
    m = pnmem.Model.preallocated(max_window=0)
    assert m.state_bytes_per_seq == 0 and m.anchors == () and all(b == 0 for b in m.full_kv_bytes_per_token)
    assert m.activation_fixed_bytes == 0 and m.activation_per_token_bytes == 0
    with pytest.raises(pnmem.ArgumentTypeError, match="not a request field: bogus"):
        pnmem.Model.preallocated(bogus=1)


def test_metrics_text(watcher):
    pnmem.admit(10, pnmem.Model.reference())
    box = pnmem.metrics_text("box")
    assert box.startswith("# HELP pnmem_level ") and "pnmem_admissions_total" not in box
    counters = pnmem.metrics_text("counters")
    assert counters.startswith("# HELP pnmem_admissions_total ") and "# HELP pnmem_level " not in counters
    both = pnmem.metrics_text()
    assert both.startswith("# HELP pnmem_level ") and "# TYPE pnmem_admissions_total counter" in both
    with pytest.raises(pnmem.ArgumentError, match="box, counters, all"):
        pnmem.metrics_text("everything")


def test_check_bytes_reserves_nothing(watcher):
    before = pnmem.pending_bytes()
    a = pnmem.check_bytes(1)
    assert a.status in (pnmem.Status.ADMITTED, pnmem.Status.DENIED) and a.need_bytes == 1
    huge = pnmem.check_bytes(2**64 - 1)
    assert huge.status in (pnmem.Status.CAPPED, pnmem.Status.DENIED)
    assert pnmem.pending_bytes() == before
    unfed = pnmem.check_bytes(1, die=15)
    assert unfed.status == pnmem.Status.DENIED and unfed.reason == pnmem.Reason.BAD_REQUEST
    with pytest.raises(pnmem.ArgumentError):
        pnmem.check_bytes(1, die=-2)
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.check_bytes(1, die="0")


RETRY_ON_A_TREE = FAKE_MEMINFO_TREE + """
import time, pnmem
write(2097152)  # 8 GiB, 2 GiB available, flat: OK
with pnmem.Watcher(root=root, poll_interval_ms=50, pressure_poll_interval_ms=50):
    ok = pnmem.check_bytes(1)
    print(ok.status, ok.retry_after().after_ms, ok.retry_after().basis)
    over = pnmem.check_bytes(ok.limit_bytes + (64 << 20))  # 64 MiB more than there is room for
    time.sleep(0.3)  # a few samples, memory flat: the level has held 0.3 s or more
    h = over.retry_after()
    print(over.status, over.reason, h.basis, h.guess, 1000 <= h.after_ms <= 60000, h.seconds >= 1)
"""


def test_retry_after_hints(watcher):
    unfed = pnmem.check_bytes(1, die=15)  # bad_request: no wait helps
    assert pnmem.retry_after(unfed) == pnmem.RetryHint(0, "none")
    huge = pnmem.check_bytes(2**64 - 1)  # more than the box could ever give: no wait helps
    assert huge.retry_after() == pnmem.RetryHint(0, "never_fits")
    with pytest.raises(pnmem.ArgumentTypeError):
        pnmem.retry_after("denied")
    # Admitted, and short with nothing coming back, on a box the test makes (a tree with its own meminfo,
    # in a child: one watcher per process), not on whatever this box is doing.
    from conftest import run_default_policy_child

    p = run_default_policy_child(RETRY_ON_A_TREE)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["admitted 0 none", "capped host_budget no_recovery True True True"], p.stdout


def test_retry_after_seconds_round_up():
    # A Retry-After header's whole seconds: any wait is at least 1 s (0 makes clients retry a pressured box at
    # once), 0 only for no wait; rounded up, as C's pnmem_retry_after_seconds and C++'s retry_after_seconds.
    for ms, seconds in ((0, 0), (-5, 0), (1, 1), (500, 1), (999, 1), (1000, 1), (1001, 2), (9999, 10),
                        (60000, 60)):
        assert pnmem.RetryHint(ms, "no_recovery").seconds == seconds, ms
    assert pnmem.RetryHint(1000, "no_recovery").guess and pnmem.RetryHint(1000, "memory_falling").guess
    assert not pnmem.RetryHint(1000, "host_recovery").guess and not pnmem.RetryHint(0, "none").guess


def test_integers_that_say_they_are_ints_are_taken():
    class Index:  # what numpy.int64 is to pnmem: an integer by __index__, not an int
        def __index__(self) -> int:
            return 1000

    a = pnmem.admit(Index(), pnmem.Model.reference())
    b = pnmem.admit(1000, pnmem.Model.reference())
    assert a.status == b.status and a.fit_tokens == b.fit_tokens

    class NumpyLikeBool:  # numpy.bool_ has __index__ too: still refused, as bool is
        def __index__(self) -> int:
            return 1
    NumpyLikeBool.__name__ = "bool_"
    for bad in (True, 1.0, "10", NumpyLikeBool()):
        with pytest.raises(pnmem.ArgumentTypeError):
            pnmem.admit(bad, pnmem.Model.reference())


def test_kv_allocation_takes_its_keyword_names(watcher):
    p = pnmem.plan(pnmem.Level.CRITICAL, 8, 4096, False)
    m = pnmem.Model.reference()
    by_keyword = pnmem.kv_allocation(plan=p, tokens=1024, model=m)
    assert by_keyword == pnmem.kv_allocation(p, 1024, m) and by_keyword.bytes > 0


def test_model_from_shape_prices_layer_groups(tmp_path):
    # Llama-3-8B's shape: 32 full-attention layers, 8 KV heads of 128; bf16 KV: 2 x 32 x 8 x 128 x 2 B = 128 KiB a token.
    llama = pnmem.Model.from_shape([pnmem.LayerGroup(pnmem.LayerKind.FULL, 32, kv_heads=8, key_dim=128)],
                                   query_heads=32, hidden_size=4096, normal_kv=pnmem.KvFormat.BF16,
                                   kv=pnmem.KvFormat.BF16, max_window=8192)
    assert llama.kv_bytes_per_token == 131072 and llama.max_window == 8192
    # DeepSeek-V3's MLA: one K-only latent row of 512 + 64 values per layer, 61 layers: 61 x 576 x 2 B.
    mla = pnmem.Model.from_shape([pnmem.LayerGroup(pnmem.LayerKind.FULL, 61, kv_heads=1, key_dim=576, k_only=True)],
                                 normal_kv=pnmem.KvFormat.BF16, kv=pnmem.KvFormat.BF16)
    assert mla.kv_bytes_per_token == 70272
    # DeepSeek-V3.2: the same latent and the indexer's keys beside it, 132 B a token and layer in every format
    # (side_bytes), as from_hf_config reads the config; the 4-bit compact format does not shrink them.
    dsa = pnmem.Model.from_shape([pnmem.LayerGroup(pnmem.LayerKind.FULL, 61, kv_heads=1, key_dim=576, k_only=True,
                                                   side_bytes=132)],
                                 normal_kv=pnmem.KvFormat.BF16, kv=pnmem.KvFormat.BF16)
    assert dsa.kv_bytes_per_token == 61 * (1152 + 132)
    config = {"model_type": "deepseek_v32", "num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128,
              "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 2048, "index_head_dim": 128,
              "index_n_heads": 64, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    read = pnmem.Model.from_hf_config(tmp_path)
    assert read.kv_bytes_per_token == dsa.kv_bytes_per_token
    assert read.full_kv_bytes_per_token[pnmem.KvFormat.Q4_0] == 61 * (18 * 18 + 132)
    with pytest.raises(pnmem.ArgumentError, match="side_bytes"):
        pnmem.Model.from_shape([pnmem.LayerGroup(pnmem.LayerKind.FULL, 1, 1, 64, side_bytes=-1)])
    with pytest.raises(pnmem.ArgumentTypeError, match="groups"):
        pnmem.Model.from_shape([("full", 32)])
    with pytest.raises(pnmem.ArgumentError, match="at most"):
        pnmem.Model.from_shape([pnmem.LayerGroup(pnmem.LayerKind.FULL, 1, 1, 64)] * 100)
    with pytest.raises(pnmem.Error, match="span of 0"):  # C's own check, its message carried
        pnmem.Model.from_shape([pnmem.LayerGroup(pnmem.LayerKind.SLIDING, 32, 8, 128)])
