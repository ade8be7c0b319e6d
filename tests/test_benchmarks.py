import argparse
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import tarfile
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def benchmark(name):
    """The module of benchmarks/NAME.py, loaded from its file (benchmarks/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", os.path.join(REPO, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ibert_throughput = benchmark("ibert_throughput")


def tiny(preset, **overrides):
    """A reproduction preset with its model made tiny by config overrides."""
    import dataclasses

    spec = preset.sections()
    spec["model"]["config_overrides"] = {**spec["model"].get("config_overrides", {}), **overrides}
    return dataclasses.replace(preset, spec=spec)


@pytest.mark.parametrize("padded", [[], ["--padded"]])
def test_throughput_harness_runs_every_model_at_every_length(padded):
    """The harness itself (no timing assertion): every model trains at every length and ratios are to BERT."""
    results = ibert_throughput.main(
        ["--hidden_size", "32", "--layers", "1", "--heads", "2", "--vocab_size", "50", "--lengths", "8", "12",
         "--batch_size", "2", "--steps", "1", "--warmup", "0", *padded]
    )
    assert sorted(results) == [8, 12]
    for r in results.values():
        assert set(r["sequences_per_second"]) == {"BERT", "I-BERT", "XLNet"}
        assert r["ratio_to_bert"]["BERT"] == 1.0
        assert all(v > 0 for v in r["sequences_per_second"].values())


def test_step_flops_counts_a_linear_layer_and_an_lstm_by_hand():
    """MFU's numerator: one forward + backward of an embedding -> LSTM -> linear model over B x L tokens costs
    2 FLOPs per weight and token forward and 4 backward in each product (the embedding lookup costs none):
    6 * (4h (d + h) + h * V) * B * L, counted here by hand."""
    import torch

    batch, length, d, h, vocab = 3, 5, 8, 6, 11

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, d)
            self.lstm = torch.nn.LSTM(d, h, batch_first=True)
            self.out = torch.nn.Linear(h, vocab, bias=False)

        def forward(self, input_ids, labels):
            logits = self.out(self.lstm(self.embed(input_ids))[0])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
            return type("Output", (), {"loss": loss})()

    ids = torch.randint(0, vocab, (batch, length))
    flops = ibert_throughput.step_flops(Toy(), {"input_ids": ids, "labels": ids})
    assert flops == 6 * (4 * h * (d + h) + h * vocab) * batch * length


def test_ndr_attention_harness_reports_time_and_memory_for_every_kind():
    ndr_attention = benchmark("ndr_attention")

    both = ndr_attention.main(["--lengths", "8", "16", "--batch_size", "1", "--heads", "2", "--head_size", "8",
                               "--repeats", "1", "--warmup", "0", "--threads", "1", "2"])
    results = both["by_threads"][2]
    assert sorted(both["by_threads"]) == [1, 2] and sorted(results) == [8, 16]
    for n in (8, 16):  # the scaling is the 1-thread time over the 2-thread time, kind by kind
        for kind, seconds in results[n]["seconds"].items():
            assert both["scaling"][n][kind] == pytest.approx(both["by_threads"][1][n]["seconds"][kind] / seconds)
    kinds = {"geometric (fused)", "geometric (PyTorch)", "softmax (SDPA)"}
    for n, r in results.items():
        assert set(r["seconds"]) == set(r["peak_bytes"]) == kinds
        assert set(r["time_ratio"]) == kinds - {"softmax (SDPA)"}
        assert all(v > 0 for v in r["seconds"].values()) and r["peak_bytes"]["geometric (PyTorch)"] > 0
        assert r["fp32_score_tensor_bytes"] == 1 * 2 * n * n * 4


def test_ndr_attention_forward_only_runs_no_backward():
    """`--forward_only` times the forward pass without autograd: no gradient reaches the inputs, and the PyTorch
    path's peak memory is below that of forward + backward, which keeps its N x N weights for the backward pass."""
    ndr_attention = benchmark("ndr_attention")
    shape = types.SimpleNamespace(batch_size=1, heads=2, head_size=8, device="cpu", dtype="float32")
    q, k, v = ndr_attention.inputs(shape, 16)
    ndr_attention.step(ndr_attention.pytorch, q, k, v, backward=False)
    assert q.grad is None and k.grad is None and v.grad is None
    ndr_attention.step(ndr_attention.pytorch, q, k, v)
    assert q.grad is not None and q.grad.abs().sum() > 0

    argv = ["--lengths", "64", "--batch_size", "1", "--heads", "2", "--head_size", "8", "--repeats", "1", "--warmup",
            "0", "--threads", "1"]
    forward = ndr_attention.main([*argv, "--forward_only"])["by_threads"][1][64]["peak_bytes"]
    training = ndr_attention.main(argv)["by_threads"][1][64]["peak_bytes"]
    assert forward["geometric (PyTorch)"] < training["geometric (PyTorch)"]


def test_ndr_attention_profile_lists_each_kinds_operations():
    """`--profile`: per length, one step of the fused kind and of SDPA, operation by operation, costliest first; the
    fused kind's own operations are the kernel's forward and backward (its autograd Function), SDPA's its own."""
    ndr_attention = benchmark("ndr_attention")
    argv = ["--lengths", "16", "--batch_size", "1", "--heads", "2", "--head_size", "8", "--repeats", "1", "--warmup",
            "0", "--threads", "1", "--profile"]
    profiles = ndr_attention.main(argv)["profile"]
    assert list(profiles) == [16] and list(profiles[16]) == ["geometric (fused)", "softmax (SDPA)"]
    for kind, names in (("geometric (fused)", ("GeometricAttention",)), ("softmax (SDPA)", ("scaled_dot_product",))):
        rows = profiles[16][kind]["operations"]
        assert [row["self_us"] for row in rows] == sorted((row["self_us"] for row in rows), reverse=True)
        assert any(name in row["name"] for row in rows for name in names), (kind, rows)
        assert profiles[16][kind]["total_us"] >= sum(row["self_us"] for row in rows)
        assert profiles[16][kind]["gpu_operations"] is None  # counted on CUDA only
    with pytest.raises(SystemExit):
        ndr_attention.main(["--end_to_end", "--profile"])


def test_triton_resources_compiles_the_kernels_for_an_h100_without_one(capsys):
    """The Triton kernels of geometric attention through Triton's whole compiler to an sm_90 (H100, H200) binary on
    this CPU: what the interpreter's tests cannot show (Triton compiles a subset of Python, and what a loop carries
    must keep its type and layout), at the default launch and in bfloat16 and float64 (the largest shared memory);
    registers, stack and shared memory come out of the binary, within what an H100 gives a program, and the programs
    per streaming multiprocessor follow CUDA's occupancy rules (hand-worked below)."""
    pytest.importorskip("triton")
    resources = benchmark("triton_resources")
    kernel = resources.kernels._forward_kernel
    caches = kernel.device_caches
    record = resources.main(["--configs", "16x4", "--dtypes", "bfloat16", "float64"])
    # the kernels launch as before afterwards: no compile-only launcher, no cached GPU target of the stand-in driver
    assert "run" not in vars(kernel) and kernel.device_caches is caches
    rows = record["results"]
    assert [(r["kernel"], r["dtype"]) for r in rows] == [
        ("forward", "bfloat16"), ("backward", "bfloat16"), ("forward", "float64"), ("backward", "float64")]
    for row in rows:
        assert 0 < row["registers"] <= 255 and row["stack_bytes"] >= 0
        assert 0 < row["shared_bytes"] <= 227 * 1024 and row["programs_per_sm"] >= 1
        assert 0 < row["barriers"] < row["instructions"]  # the gathers and scans exchange tiles through shared memory
    listing = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;                                    /* 0x00000a00ff017b82 */
                                                                                             /* 0x000ff00000000800 */
        /*0df0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                             /* 0x0000000000007b1d */
        /*0e00*/              @!P0 BRA 0x1000 ;                                              /* 0x0000000000007b1d */
        /*0e10*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                             /* 0x0000000000007b1d */
        /*0e20*/                   EXIT ;                                                    /* 0x000000000000794d */
"""
    assert resources.sass_counts(listing) == {"instructions": 5, "barriers": 2}
    assert "backward | float64 | 16x4 |" in capsys.readouterr().out
    # 153 registers: 4,896 per warp, given out as 5,120; a quarter of the register file (16,384) holds 3 such warps,
    # the SM 12 -> 3 programs of 4 warps
    assert resources.programs_per_sm(153, 2048, 4) == 3
    # 88 registers: 2,816 per warp; 5 warps per quarter, 20 per SM -> 10 programs of 2 warps (not 65,536 / 5,632 = 11)
    assert resources.programs_per_sm(88, 0, 2) == 10
    # 255 registers on 8 warps: 8,192 per warp, 2 per quarter -> 1 program
    assert resources.programs_per_sm(255, 0, 8) == 1
    # 100 KB of shared memory (and 1 KB kept): 2 programs in an H100's 228 KB, 1 in an A100's 164 KB
    assert resources.programs_per_sm(64, 100 * 1024, 4) == 2
    assert resources.programs_per_sm(64, 100 * 1024, 4, capability=80) == 1
    # a small kernel: 64 warps per SM at most -> 16 programs of 4 warps
    assert resources.programs_per_sm(32, 1024, 4) == 16
    assert resources.programs_per_sm(32, 1024, 4, capability=75) is None  # limits not known here


def test_ndr_attention_triton_launch_configurations_are_parsed_set_and_restored():
    """`--triton_configs 64x8`: rows per program x warps, powers of two; the kernels read them from their module
    while the context holds (forward and backward), the defaults come back after, also after an error; on a CPU the
    option is refused in one line."""
    from lengthgen.cli import launch_configuration

    ndr_attention = benchmark("ndr_attention")
    triton = ndr_attention.TRITON_MODULE

    assert launch_configuration("64x8") == (64, 8)
    assert launch_configuration("16x2") == (16, 2)
    for bad in ("48x8", "8x4", "64x3", "64", "x8", "64x0"):
        with pytest.raises(argparse.ArgumentTypeError, match="BLOCKxWARPS"):
            launch_configuration(bad)
    defaults = triton.BLOCK, triton.NUM_WARPS
    with pytest.raises(RuntimeError, match="inside"):
        with triton.launch_configuration(64, 4):
            assert (triton._block(None), triton.NUM_WARPS) == (64, 4)
            raise RuntimeError("inside")
    assert (triton.BLOCK, triton.NUM_WARPS) == defaults and triton._block(None) == defaults[0]
    with pytest.raises(SystemExit):
        ndr_attention.main(["--lengths", "8", "--triton_configs", "16x4"])


def test_ndr_attention_end_to_end_mode_times_every_variant_at_every_shape():
    ndr_attention = benchmark("ndr_attention")

    results = ndr_attention.main(["--end_to_end", "--overrides", "num_layers=2,hidden_size=16,intermediate_size=32",
                                  "--eval_lengths", "40", "--eval_batch_size", "1", "--end_to_end_repeats", "1",
                                  "--threads", "1"])["by_threads"][1]
    assert sorted(results) == sorted(
        ["ctl train N=16 batch=128", "ctl eval N=40 batch=1",
         "listops train N=50 batch=32", "listops eval N=40 batch=1"]
    )
    for r in results.values():
        assert set(r["seconds"]) == set(ndr_attention.VARIANTS)
        assert r["ratio_to_softmax_relative"]["softmax + relative"] == 1.0
    with pytest.raises(ValueError, match="no field"):
        ndr_attention.main(["--end_to_end", "--overrides", "num_layer=2"])


def test_cpu_precision_harness_times_both_precisions_and_compares_loss_curves(monkeypatch):
    """The harness itself on tiny versions of two presets (no timing assertion)."""
    cpu_precision = benchmark("cpu_precision")

    presets = {
        "ndr-ctl-backward": tiny(cpu_precision.PRESETS["ndr-ctl-backward"], hidden_size=16, intermediate_size=32,
                                 num_layers=2),
        "ibert-nsp-add": tiny(cpu_precision.PRESETS["ibert-nsp-add"], hidden_size=16, num_hidden_layers=1,
                              num_attention_heads=2, intermediate_size=32),
    }
    monkeypatch.setattr(cpu_precision, "PRESETS", presets)
    results = cpu_precision.main(["--models", *presets, "--batch_size", "4", "--repeats", "1", "--curve_steps", "4"])
    for r in results["models"]:
        seconds = r["seconds_per_step"]
        assert set(seconds) == {"fp32", "bf16"} and r["bf16_over_fp32"] == seconds["bf16"] / seconds["fp32"]
        assert set(r["curves"]) == {"fp32", "bf16", "fp32_seed1"} and all(len(c) == 4 for c in r["curves"].values())
        assert r["final_loss"]["fp32"] == r["curves"]["fp32"][-1]  # the last quarter of 4 steps is one step
        assert r["curves"]["fp32"][0] == pytest.approx(r["curves"]["bf16"][0], rel=0.05)  # same weights, same batch


def test_recurrence_generation_harness_times_every_way_of_generating_at_every_window(tmp_path):
    """The harness itself (no timing assertion): each window's runs generate up to its total, ratios are to the
    plain model, and the JSON records the machine and the precision."""
    import json

    recurrence_generation = benchmark("recurrence_generation")
    output = tmp_path / "generation.json"
    results = recurrence_generation.main(
        ["--windows", "8", "16", "--total", "20", "24", "--prompt", "4", "--layers", "3", "--hidden_size", "32",
         "--heads", "2", "--intermediate_size", "64", "--vocab_size", "100", "--uncached", "--threads", "1",
         "--json", str(output)])["results"]
    assert [(r["window"], r["total"], r["new_tokens"]) for r in results] == [(8, 20, 16), (16, 24, 20)]
    for r in results:
        assert set(r["tokens_per_second"]) == {"plain", "recurrent", "recurrent, use_cache=False"}
        assert r["ratio"]["plain"] == 1.0 and all(v > 0 for v in r["tokens_per_second"].values())
    saved = json.loads(output.read_text())
    assert saved["precision"] == "float32" and saved["hardware"]["threads"] == 1 and saved["results"] == results
    with pytest.raises(SystemExit):
        recurrence_generation.parse_args(["--windows", "8", "16", "--total", "20"])


@pytest.mark.parametrize("model, plain, windows, cases", [  # one case fewer for the second family
    ("gpt2", "plain GPT-2", ["1", "3"], ["1,0", "1,1", "3,1"]), ("roberta", "plain RoBERTa", ["1"], ["1,0", "1,1"])])
def test_recurrence_memory_harness_runs_each_case_in_a_subprocess(tmp_path, model, plain, windows, cases):
    import json

    recurrence_memory = benchmark("recurrence_memory")

    output = tmp_path / "memory.json"
    results = recurrence_memory.main(
        ["--model", model, "--windows", *windows, "--window_size", "16", "--n_layer", "3", "--n_embd", "32",
         "--n_head", "2", "--vocab_size", "100", "--max_plain_windows", "1", "--throughput_windows", "2",
         "--repeats", "1", "--json", str(output)]
    )
    assert sorted(results["peak_bytes"]) == cases  # no plain run past --max_plain_windows
    assert all(set(v) == {"step", "training"} for v in results["peak_bytes"].values())
    # the whole training footprint holds the step and more (a tiny model may not raise the peak RSS at all)
    assert all(v["training"] >= v["step"] for v in results["peak_bytes"].values())
    assert set(results["tokens_per_second"]) == {"recurrent", plain, f"{plain}, one window at a time"}
    assert results["ratio"] > 0 and results["ratio_to_one_window_at_a_time"] > 0
    saved = json.loads(output.read_text())
    assert saved["peak_bytes"] == results["peak_bytes"] and saved["ratio"] == results["ratio"]


@pytest.mark.parametrize("length, window", [([], 128), (["--pretrain_length", "512"], 512)])
def test_recurrence_real_text_reads_the_pretrained_hybrid_in_windows_of_its_pretraining_length(tmp_path, monkeypatch,
                                                                                               length, window):
    """The hybrid's as-is readings at its pre-training length use the length pretrain() chunked the corpus in:
    --pretrain_length, or --window_size when that is not given."""
    recurrence_real_text = benchmark("recurrence_real_text")
    runs = {}
    monkeypatch.setattr(recurrence_real_text, "train_and_evaluate",
                        lambda model, data, training: runs.update({os.path.basename(training.output_dir): model}))
    (tmp_path / "pretrained").mkdir()
    args = recurrence_real_text.parse_args(["--family", "qwen3_5", *length, "--variants", "--stage", "finetune",
                                            "--output_dir", str(tmp_path), "--seeds", "0"])
    recurrence_real_text.finetune(args, tmp_path)
    assert {name: model.window_size for name, model in runs.items()} == {
        "pretrained-as-is": 128, "pretrained-as-is-carried": 128,
        f"pretrained-as-is-window{window}": window, f"pretrained-as-is-window{window}-carried": window}



def test_recurrence_real_text_reports_the_pretraining_settings_it_was_made_with(tmp_path):
    """The report's settings are the pre-training's as its stage recorded them, not the report call's defaults, and
    each row counts the seeds it found (three here, where the report call's --seeds default names two)."""
    recurrence_real_text = benchmark("recurrence_real_text")
    (tmp_path / "pretrained").mkdir()
    made_with = {"family": "llama", "window_size": 128, "pretrain_length": None, "vocab_size": 4096, "hidden_size": 256,
                 "num_layers": 4, "pretrain_steps": 1000, "pretrain_batch_size": 8, "pretrain_learning_rate": 1e-3}
    (tmp_path / "pretrained" / "pretrain_results.json").write_text(json.dumps(
        {"eval": {"eval_loss": 3.0}, "settings": made_with}))
    for seed, perplexity in enumerate((90.0, 88.0, 89.0)):
        (tmp_path / f"h_prev-seed{seed}").mkdir()
        (tmp_path / f"h_prev-seed{seed}" / "all_results.json").write_text(json.dumps({
            "test_overlap0_perplexity_per_word": perplexity, "test_overlap0_perplexity": perplexity / 2,
            "test_overlap0_flops_per_token": 1e6, "test_overlap0_words": 100, "test_overlap0_tokens": 130}))
    report = recurrence_real_text.main(["--stage", "report", "--output_dir", str(tmp_path)])
    assert {key: report["settings"][key] for key in made_with} == made_with and "seeds" not in report["settings"]
    assert report["rows"]["h_prev @ 0"]["seeds"] == 3 and report["rows"]["h_prev @ 0"]["perplexity_per_word"] == 89.0

def test_recurrence_memory_names_a_failed_case_and_shows_its_error():
    """A case's subprocess that fails raises in the parent with the end of the child's stderr (its traceback), not
    a bare exit status."""
    recurrence_memory = benchmark("recurrence_memory")

    with pytest.raises(RuntimeError) as failed:  # only the child builds the model, and .to("no-such-device") fails
        recurrence_memory.main(["--windows", "1", "--window_size", "4", "--n_layer", "1", "--n_embd", "8",
                                "--n_head", "1", "--vocab_size", "10", "--max_plain_windows", "0",
                                "--device", "no-such-device"])
    message = str(failed.value)
    assert message.startswith("the case of 1 window(s) with checkpointing failed (exit status 1)")
    assert "Traceback" in message and "no-such-device" in message


def test_recurrence_memory_llama_case_wraps_the_plain_llama_it_compares_with():
    """The rotary family's case (its memory cases run in subprocesses like the others'): the recurrent model wraps the
    very Llama the throughput compares with, and the three arms run."""
    recurrence_memory = benchmark("recurrence_memory")
    import torch
    from transformers import LlamaForCausalLM

    from lengthgen.modeling import CausalLMWithRecurrence

    args = recurrence_memory.parse_args(["--model", "llama", "--window_size", "16", "--n_layer", "3", "--n_embd", "32",
                                         "--n_head", "2", "--vocab_size", "100", "--throughput_windows", "2",
                                         "--repeats", "1"])
    recurrent = recurrence_memory.build(args)
    assert isinstance(recurrent, CausalLMWithRecurrence) and recurrent.config.insertion_layer == 2
    assert isinstance(recurrence_memory.plain_model(args, recurrent), LlamaForCausalLM)
    assert recurrence_memory.plain_model(args, recurrent) is recurrent.decoder
    speed = recurrence_memory.throughput(args)
    assert set(speed["tokens_per_second"]) == {"recurrent", "plain Llama", "plain Llama, one window at a time"}
    recurrent_inputs, plain_inputs = recurrence_memory.training_inputs(args, 2)  # both arms read the same tokens
    assert torch.equal(recurrent_inputs["input_ids"].reshape(2, 16), plain_inputs["input_ids"])
    rates = speed["tokens_per_second"]
    assert speed["ratio"] == pytest.approx(rates["recurrent"] / rates["plain Llama"])


def test_secret_token_loss_reads_the_token_after_each_key_by_hand():
    """A stub model that gives the word after `key` probability 1/2 (logit ln(V - 1) among V zeros) and every other
    prediction 1/V: the secret's loss is ln 2 after the first key and after the later ones; a reading of any other
    position would give ln V."""
    import torch

    recurrence_synthetic = benchmark("recurrence_synthetic")
    from lengthgen.data.tokenization import word_tokenizer

    tokenizer = word_tokenizer(["key", "s0", "s1", "w0", "w1", "w2"])
    vocab, key = len(tokenizer), tokenizer.convert_tokens_to_ids("key")

    class Stub:
        def __call__(self, ids):
            logits = torch.zeros(1, ids.shape[1], vocab)
            for t in range(ids.shape[1] - 1):
                if ids[0, t] == key:
                    logits[0, t, ids[0, t + 1]] = math.log(vocab - 1)
            return types.SimpleNamespace(logits=logits)

    documents = ["w0 key s1 w1 w2 key s1 w0", "key s0 w2 w1 key s0 key s0"]
    for first in (True, False):
        loss = recurrence_synthetic.secret_token_loss(Stub(), tokenizer, documents, first)
        assert loss == pytest.approx(math.log(2), rel=1e-5)


@pytest.mark.parametrize("family, insertion_layer", [("gpt2", 2), ("qwen3_5", 1)])
def test_recurrence_synthetic_harness_pretrains_then_fine_tunes_both_models(tmp_path, family, insertion_layer):
    import json

    recurrence_synthetic = benchmark("recurrence_synthetic")
    from transformers import AutoConfig

    output = tmp_path / "synthetic.json"
    results = recurrence_synthetic.main(
        ["--train_documents", "24", "--eval_documents", "4", "--windows_per_document", "3", "--window_size", "16",
         "--windows_per_example", "2", "--n_layer", "3", "--n_embd", "32", "--pretrain_steps", "2",
         "--finetune_steps", "2", "--batch_size", "4", "--output_dir", str(tmp_path / "run"), "--json", str(output),
         "--family", family]
    )
    for name in ("disjoint", "recurrent"):  # the training's own evaluation: perplexity is exp of its mean loss
        assert results[name]["perplexity_per_token"] == pytest.approx(math.exp(results[name]["loss"]), rel=1e-6)
    recurrent = AutoConfig.from_pretrained(tmp_path / "run" / "recurrent")
    decoder = recurrent.decoder_config["model_type"] if family != "gpt2" else recurrent.model_type
    assert decoder == {"gpt2": "gpt2_recurrent", "qwen3_5": "qwen3_5_text"}[family]
    assert recurrent.insertion_layer == insertion_layer  # index 2, or the hybrid's attention layer below it
    assert json.loads(output.read_text()) == json.loads(json.dumps(results))
    # the corpus: every window of every document states the secret once, after `key`
    document = (tmp_path / "run" / "corpus" / "train" / "000000.txt").read_text().split()
    assert len(document) == 3 * 16 and document.count("key") == 3
    assert len({document[i + 1] for i, word in enumerate(document) if word == "key"}) == 1


def test_recurrence_synthetic_over_seeds_reads_finished_runs_when_run_again(tmp_path, monkeypatch):
    recurrence_synthetic = benchmark("recurrence_synthetic")
    runs = []
    train = recurrence_synthetic.train_and_evaluate
    monkeypatch.setattr(recurrence_synthetic, "train_and_evaluate", lambda *args: runs.append(args) or train(*args))

    arguments = ["--train_documents", "16", "--eval_documents", "2", "--windows_per_document", "3", "--window_size",
                 "16", "--windows_per_example", "2", "--n_layer", "2", "--n_embd", "32", "--pretrain_steps", "1",
                 "--finetune_steps", "1", "--batch_size", "4", "--output_dir", str(tmp_path), "--family", "qwen3_5",
                 "--finetune_seeds", "2"]
    results = recurrence_synthetic.main(arguments)
    for name in ("disjoint", "recurrent"):
        seeds = results[name]["per_seed"]
        assert len(seeds) == 2 and (tmp_path / f"{name}-s1" / "all_results.json").exists()
        mean = (seeds[0]["secret_loss_later_mentions"] + seeds[1]["secret_loss_later_mentions"]) / 2
        assert results[name]["secret_loss_later_mentions"] == pytest.approx(mean)
        assert "secret_loss_later_mentions_std" in results[name]
    assert len(runs) == 1 + 2 * 2  # pre-training, then both copies per seed
    assert recurrence_synthetic.main(arguments) == results  # read again, nothing run again
    assert len(runs) == 1 + 2 * 2
    assert recurrence_synthetic.VARIANTS["recurrent_carried"][-2:] == ["--carry_layer_states", "True"]
    with pytest.raises(SystemExit):
        recurrence_synthetic.main(["--carry_layer_states"])  # GPT-2 has no recurrent layers to carry


@pytest.mark.slow
@pytest.mark.parametrize("family", ["gpt2", "qwen3_5"])
def test_recurrence_carries_a_fact_across_windows_that_a_disjoint_model_cannot_know(family):
    """The README's synthetic benchmark at its defaults (about 4 minutes for GPT-2, 5 for the hybrid Qwen3.5): after
    the same fine-tuning budget, the recurrent model predicts the secret in later windows and the disjoint baseline
    stays at chance."""
    recurrence_synthetic = benchmark("recurrence_synthetic")

    results = recurrence_synthetic.main(["--family", family])
    chance = results["chance_secret_loss"]
    assert results["recurrent"]["secret_loss_later_mentions"] < 0.25 * chance
    assert results["disjoint"]["secret_loss_later_mentions"] > 0.9 * chance
    assert results["perplexity_ratio_recurrent_over_disjoint"] < 0.97


def test_recurrent_bias_study_trains_every_model_per_seed_and_summarizes_over_seeds(tmp_path, monkeypatch):
    """A study preset (presets/study.yaml's format, tiny): every model and seed through the runner, then the mean and
    sample standard deviation over seeds of each number; given again, finished runs are read, not trained again."""
    import statistics

    from lengthgen.reproduction import study
    from lengthgen.training import ExperimentResult
    from lengthgen.training.runner import ExperimentTrainer

    tiny = {"tiny-study": {
        "reference": "a test", "seeds": 2,
        "models": {"lstm": study.STUDIES["recurrent-bias-attractors"]["models"]["lstm"]},
        "data": {"dataset_name": "subject_verb_agreement", "dataset_config_name": "attractors",
                 "dataset_param": {"train_size": 128, "validation_size": 16, "test_size": 32}},
        "training": {"do_train": True, "do_eval": True, "max_steps": 2, "per_device_train_batch_size": 32,
                     "save_strategy": "no", "report_to": "none", "use_cpu": True, "disable_tqdm": True}}}
    monkeypatch.setattr(study, "STUDIES", tiny)
    record = study.run_study("tiny-study", str(tmp_path / "runs"), str(tmp_path / "results"))
    seeds = [ExperimentResult.load(str(tmp_path / "runs" / "tiny-study" / "lstm" / f"seed{s}")) for s in range(2)]
    assert [r.spec["training"]["seed"] for r in seeds] == [0, 1]
    for metric, difficulty in (("accuracy", "3"), ("ece", "all")):
        values = [r.scores["test"][difficulty][metric] for r in seeds]
        entry = record["summary"]["lstm"][metric][difficulty]
        assert entry["mean"] == pytest.approx(statistics.fmean(values))
        assert entry["std"] == pytest.approx(statistics.stdev(values))
    assert record["command"] == "lengthgen reproduce tiny-study"
    assert (tmp_path / "results" / "tiny-study.png").is_file()
    table = (tmp_path / "results" / "tiny-study.md").read_text()
    mean, std = record["summary"]["lstm"]["accuracy"]["3"]["mean"], record["summary"]["lstm"]["accuracy"]["3"]["std"]
    assert f"| lstm | 2 | {mean:.3f} +- {std:.3f} |" in table
    monkeypatch.setattr(ExperimentTrainer, "train", lambda *a, **k: pytest.fail("a finished run trained again"))
    assert (
        study.run_study("tiny-study", str(tmp_path / "runs"), str(tmp_path / "results"))["summary"]
        == record["summary"]
    )


def test_gate_wave_reads_each_function_column_and_its_update_step():
    """benchmarks/ndr_gate_wave.py: the column of the k-th applied function is where the tokenizer puts that function's
    letter, in both presentation orders; a column's update step is the first step its gate reaches half its peak."""
    ndr_gate_wave = benchmark("ndr_gate_wave")
    import torch
    from transformers import AutoTokenizer

    from lengthgen.data.ctl import ctl_example, ctl_tables

    tokenizer = AutoTokenizer.from_pretrained(os.path.join(REPO, "checkpoints", "ndr-ctl-backward"))
    functions = (4, 0, 7, 2)  # applied in this order: a..i = 0..8
    tables = ctl_tables(8, 9, seed=0)
    for direction in ("forward", "backward"):
        ids = tokenizer(ctl_example(5, functions, tables, direction, bits=3)["input"])["input_ids"]
        letters = [tokenizer.convert_ids_to_tokens(ids[c]) for c in ndr_gate_wave.function_columns(direction, 4)]
        assert letters == ["e", "a", "h", "c"], direction

    # steps x batch x columns; column 0 rises at step 2 (0.5 >= half of 0.9), column 1 only at its peak, step 3
    gates = torch.tensor([[[0.1, 0.0]], [[0.5, 0.1]], [[0.9, 0.8]], [[0.6, 0.3]]])
    assert ndr_gate_wave.update_steps(gates).tolist() == [[2, 3]]


def test_gate_wave_runs_a_shipped_checkpoint(tmp_path):
    import json

    ndr_gate_wave = benchmark("ndr_gate_wave")

    checkpoint = os.path.join(REPO, "checkpoints", "ndr-ctl-forward")
    [result] = ndr_gate_wave.main([checkpoint, "--depth", "6", "--examples", "16", "--num_steps", "14",
                                   "--json", str(tmp_path / "wave.json")])
    assert result["direction"] == "forward" and result["trained_steps"] == 14
    assert result["accuracy"] >= 0.9  # 6 applications: the validation depths, 1.000 on the model's card
    assert len(result["function_update_step"]) == 6 and all(1 <= s <= 14 for s in result["function_update_step"])
    assert json.loads((tmp_path / "wave.json").read_text()) == [result]


def test_length_binning_harness_trains_the_same_problems_in_both_orders_with_less_padding_binned(monkeypatch):
    """Over a whole mega-batch the two orderings hold the same problems; the binned batches pad no more than random
    ones (each pads to its own longest, and sorting puts like lengths together). No timing assertion."""
    length_binning = benchmark("length_binning")

    presets = {"ndr-ctl-backward": tiny(length_binning.PRESETS["ndr-ctl-backward"], hidden_size=16,
                                        intermediate_size=32, num_layers=2)}
    monkeypatch.setattr(length_binning, "PRESETS", presets)
    _, batches = length_binning.two_orderings("ndr-ctl-backward", 4, length_binning.MEGA_BATCH)

    def problems(mode):
        return sorted((tuple(ids[mask.bool()].tolist()), int(label)) for b in batches[mode]
                      for ids, mask, label in zip(b["input_ids"], b["attention_mask"], b["labels"]))

    assert len(problems("random")) == 4 * length_binning.MEGA_BATCH and problems("random") == problems("binned")
    padded = {m: sum(b["input_ids"].numel() for b in batches[m]) for m in batches}
    assert padded["binned"] < padded["random"]
    results = length_binning.main(["--models", "ndr-ctl-backward", "--batch_size", "4", "--batches", "5"])
    r = results["models"][0]
    assert r["binned_over_random"] == pytest.approx(r["seconds_per_step"]["binned"] / r["seconds_per_step"]["random"])
    assert r["padded_over_real_tokens"]["binned"] <= r["padded_over_real_tokens"]["random"]


@pytest.mark.parametrize("batches", [50, 30, 20, 7, 2, 1])
def test_length_binning_spreads_any_number_of_batches_evenly_over_the_mega_batch(batches):
    """Fewer batches than a mega-batch's are spread from its shortest binned batch to its longest: each pick is the
    batch nearest its evenly spaced ideal position, the picks are distinct and in order, and all 50 keep every batch
    in order (the published figures' selection); one batch is the middle one."""
    from fractions import Fraction

    length_binning = benchmark("length_binning")
    mega = length_binning.MEGA_BATCH
    chosen = length_binning.spread(batches)
    assert len(chosen) == batches == len(set(chosen)) and chosen == sorted(chosen)
    assert all(0 <= b < mega for b in chosen)
    if batches == 1:
        assert chosen == [(mega - 1) // 2]
    else:
        ideal = [Fraction(i * (mega - 1), batches - 1) for i in range(batches)]
        assert all(abs(b - x) <= Fraction(1, 2) for b, x in zip(chosen, ideal))
        gaps = [b - a for a, b in zip(chosen, chosen[1:])]
        assert max(gaps) - min(gaps) <= 1  # evenly spread: no stretch of lengths skipped
    if batches == mega:
        assert chosen == list(range(mega))
    for wrong in (0, mega + 1):
        with pytest.raises(ValueError, match="between 1 and"):
            length_binning.spread(wrong)


@pytest.mark.parametrize("script, argv, flag", [
    ("length_binning", ["--batches", "0"], "--batches"),
    ("length_binning", ["--batches", "51"], "--batches"),
    ("length_binning", ["--batch_size", "0"], "--batch_size"),
    ("recurrence_generation", ["--prompt", "0"], "--prompt"),
    ("recurrence_generation", ["--repeats", "0"], "--repeats"),
    ("recurrence_generation", ["--windows", "8", "0"], "--windows"),
    ("ibert_throughput", ["--steps", "0"], "--steps"),
    ("ibert_throughput", ["--warmup", "-1"], "--warmup"),
    ("ndr_attention", ["--repeats", "0"], "--repeats"),
    ("ndr_attention", ["--warmup", "-1"], "--warmup"),
    ("ndr_attention", ["--dtype", "fp16"], "--dtype"),
    ("ndr_attention", ["--end_to_end", "--forward_only"], "--forward_only"),
    ("recurrence_memory", ["--repeats", "0"], "--repeats"),
    ("recurrence_memory", ["--windows", "1", "0"], "--windows"),
    ("cpu_precision", ["--curve_steps", "3"], "--curve_steps"),
    ("cpu_precision", ["--repeats", "0"], "--repeats"),
])
def test_benchmark_counts_out_of_range_get_one_line_and_status_2(capsys, script, argv, flag):
    """A count the benchmark cannot run with stops it before any work: argparse's usage, then one error line naming
    the flag, exit status 2."""
    main = benchmark(script).main
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    *usage, error = capsys.readouterr().err.splitlines()
    assert usage[0].startswith("usage:") and all(line.startswith(" ") for line in usage[1:])
    assert f": error: {flag} " in error or f": error: argument {flag}: " in error


def test_ndr_attention_runs_at_every_dtype_it_offers():
    """Each of --dtype's choices runs the attention rows (on a CPU, float16 and bfloat16 inputs too)."""
    ndr_attention = benchmark("ndr_attention")

    for dtype in ("float32", "bfloat16", "float16"):
        results = ndr_attention.main(["--lengths", "8", "--batch_size", "1", "--heads", "1", "--head_size", "4",
                                      "--repeats", "1", "--warmup", "0", "--threads", "1", "--dtype", dtype])
        assert set(results["by_threads"][1][8]["seconds"]) == set(ndr_attention.KINDS)


def _gpu_piece_in(root):
    """benchmarks/gpu_piece.sh copied into a scratch repository `root` (it works from its own checkout's root)."""
    os.makedirs(os.path.join(root, "benchmarks"))
    shutil.copy(os.path.join(REPO, "benchmarks", "gpu_piece.sh"), os.path.join(root, "benchmarks"))
    return os.path.join(root, "benchmarks", "gpu_piece.sh")


def _device_with_fake_python(tmp_path, python_script, **variables):
    """The GPU machine's side as gpu_piece.sh sees it, with `python_script` as python3 (first on PATH) and an empty
    $OUT: (environment, $OUT)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(python_script)
    (bin_dir / "python3").chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    return os.environ | {"OUT": str(out), "PATH": f"{bin_dir}:{os.environ['PATH']}", **variables}, out


def _repo_with_a_kept_piece(tmp_path):
    """A scratch repository with gpu_piece.sh and a piece kept at step 100 of preset `ndr-x`: (script, pieces
    folder)."""
    script = _gpu_piece_in(tmp_path / "repo")
    pieces = tmp_path / "repo" / "docs" / "results" / "pieces" / "ndr-x"
    pieces.mkdir(parents=True)
    (pieces / "checkpoint-100.tar.part00").write_text("old")
    return script, pieces


def _archive_parts(folder, files_at, part_bytes):
    """`folder`'s subfolders as the device command leaves them: one tar archive cut into gpu_piece.tar.partNN."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in sorted(os.listdir(folder)):
            tar.add(os.path.join(folder, name), arcname=name)
    data = buffer.getvalue()
    os.makedirs(files_at, exist_ok=True)
    for index in range(0, len(data), part_bytes):
        with open(os.path.join(files_at, f"gpu_piece.tar.part{index // part_bytes:02d}"), "wb") as f:
            f.write(data[index : index + part_bytes])


def test_gpu_piece_collect_replaces_the_kept_piece_and_files_the_results(tmp_path):
    """What comes back from the device (an archive in parts holding NAME/: packed parts, JSON, plot) replaces the
    piece kept in docs/results/pieces/NAME/ (the older step's parts go) and files the results in docs/results/."""
    script, pieces = _repo_with_a_kept_piece(tmp_path)
    (pieces / "README.md").write_text("kept")
    back = tmp_path / "device" / "ndr-x"
    back.mkdir(parents=True)
    for name, text in [("checkpoint-250.tar.part00", "a"), ("checkpoint-250.tar.part01", "b"),
                       ("ndr-x.json", "{}"), ("ndr-x.png", "png")]:
        (back / name).write_text(text)
    _archive_parts(tmp_path / "device", tmp_path / "files_at", part_bytes=4096)
    assert len(os.listdir(tmp_path / "files_at")) > 1
    subprocess.run(["bash", script, "--collect", str(tmp_path / "files_at")], check=True, capture_output=True)
    assert sorted(os.listdir(pieces)) == ["README.md", "checkpoint-250.tar.part00", "checkpoint-250.tar.part01"]
    assert (pieces / "checkpoint-250.tar.part01").read_text() == "b"
    results = tmp_path / "repo" / "docs" / "results"
    assert (results / "ndr-x.json").read_text() == "{}" and (results / "ndr-x.png").read_text() == "png"


FAKE_PYTHON = """#!/usr/bin/env bash
# python3 as gpu_piece.sh calls it on the GPU machine: pip installs nothing; `-m lengthgen.commands.main reproduce
# NAME-MIB ... --pack_to DIR` packs a checkpoint of MIB MiB into DIR and writes NAME-MIB's results JSON
[[ "$2" == "pip" ]] && exit 0
name=$4 pack=${!#}
mkdir -p "$pack"
head -c $(( ${name##*-} << 20 )) /dev/zero > "$pack/checkpoint-5.tar.part00"
echo '{"name": "'$name'"}' > "docs/results/$name.json"
"""


def test_gpu_piece_brings_back_what_fits_in_64_mib_and_collect_files_it(tmp_path):
    """The device command trains its presets side by side (python3 faked here: each 'packs' a checkpoint of the size its
    name ends with, in MiB) and leaves in $OUT one archive cut into at most 16-MiB parts, at most 64 MiB in all: presets
    in the order given while they fit, the one that does not named on stderr with exit status 1. --collect here then
    files each brought-back preset's piece and JSON."""
    script, _ = _repo_with_a_kept_piece(tmp_path)
    repo = tmp_path / "repo"
    (repo / "docs" / "results").mkdir(exist_ok=True)
    env, out = _device_with_fake_python(tmp_path, FAKE_PYTHON)
    result = subprocess.run(["bash", script, "60", "ndr-a-20", "ndr-b-30", "ndr-c-30"], env=env, capture_output=True,
                            text=True)
    assert result.returncode == 1
    assert "ndr-c-30 left out" in result.stderr and "ndr-a-20" not in result.stderr
    parts = sorted(os.listdir(out))
    assert parts == [f"gpu_piece.tar.part{i:02d}" for i in range(len(parts))] and len(parts) <= 8
    sizes = [os.path.getsize(out / part) for part in parts]
    assert max(sizes) <= 16 << 20 and sum(sizes) <= 64 << 20

    subprocess.run(["bash", script, "--collect", str(out)], env=env, check=True, capture_output=True)
    pieces = repo / "docs" / "results" / "pieces"
    assert os.path.getsize(pieces / "ndr-a-20" / "checkpoint-5.tar.part00") == 20 << 20
    assert os.path.getsize(pieces / "ndr-b-30" / "checkpoint-5.tar.part00") == 30 << 20
    assert not (pieces / "ndr-c-30").exists()
    assert json.loads((repo / "docs" / "results" / "ndr-b-30.json").read_text()) == {"name": "ndr-b-30"}


def test_gpu_piece_collect_with_nothing_back_leaves_the_kept_piece(tmp_path):
    script, pieces = _repo_with_a_kept_piece(tmp_path)
    (tmp_path / "files_at").mkdir()
    result = subprocess.run(["bash", script, "--collect", str(tmp_path / "files_at")], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == ""
    assert os.listdir(pieces) == ["checkpoint-100.tar.part00"]


def test_gpu_piece_travel_trims_what_goes_to_the_device_and_collect_puts_it_back(tmp_path):
    """--travel takes checkpoints/, the other presets' pieces and (but for `board`) the board's cells out of git's
    index (the device sends the index and untracked files that are not ignored), leaving the files alone; --collect
    puts the index back as HEAD has it."""
    script, pieces = _repo_with_a_kept_piece(tmp_path)
    repo = tmp_path / "repo"
    (repo / "checkpoints" / "model").mkdir(parents=True)
    (repo / "checkpoints" / "model" / "model.safetensors").write_text("weights")
    (repo / "docs" / "leaderboard" / "chomsky" / "cells").mkdir(parents=True)
    (repo / "docs" / "leaderboard" / "chomsky" / "cells" / "lstm__task.json").write_text("{}")
    (pieces.parent / "ndr-y").mkdir()
    (pieces.parent / "ndr-y" / "checkpoint-7.tar.part00").write_text("other")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "kept"], check=True)
    tracked = subprocess.run(git + ["ls-files"], capture_output=True, text=True, check=True).stdout.split()

    travel = subprocess.run(["bash", script, "--travel", "ndr-x"], capture_output=True, text=True, check=True)
    assert "checkpoints docs/leaderboard/chomsky docs/results/pieces/ndr-y" in travel.stdout
    travels = subprocess.run(git + ["ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert sorted(travels) == ["benchmarks/gpu_piece.sh", "docs/results/pieces/ndr-x/checkpoint-100.tar.part00"]
    assert (repo / "checkpoints" / "model" / "model.safetensors").read_text() == "weights"
    again = subprocess.run(["bash", script, "--travel", "ndr-x"], capture_output=True, text=True)
    assert again.returncode == 2 and "--restore first" in again.stderr

    (tmp_path / "files_at").mkdir()
    subprocess.run(["bash", script, "--collect", str(tmp_path / "files_at")], check=True, capture_output=True)
    assert subprocess.run(git + ["ls-files"], capture_output=True, text=True).stdout.split() == tracked
    assert subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True).stdout == ""
    assert "gpu_piece" not in (repo / ".git" / "info" / "exclude").read_text()

    subprocess.run(["bash", script, "--travel", "board"], capture_output=True, text=True, check=True)
    travels = subprocess.run(git + ["ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert "docs/leaderboard/chomsky/cells/lstm__task.json" in travels
    subprocess.run(["bash", script, "--restore"], check=True, capture_output=True)
    assert subprocess.run(git + ["status", "--porcelain"], capture_output=True, text=True).stdout == ""


FAKE_BOARD_PYTHON = """#!/usr/bin/env bash
# python3 as gpu_piece.sh calls it for `board`: pip installs nothing; `-m lengthgen.commands.main leaderboard ...
# --output_dir DIR --workers K ...` finishes one cell, records its arguments, then runs past its time
[[ "$2" == "pip" ]] && exit 0
echo "$@" > /tmp/board-arguments-$PPID
echo '{"status": "ok"}' > docs/leaderboard/chomsky/cells/new__cell.json
exec sleep 60
"""


def test_gpu_piece_board_brings_back_the_cells_it_finished_and_collect_files_them(tmp_path):
    """`board` runs the Chomsky-protocol leaderboard on the GPU for the seconds given (stopped there, which is not a
    failure), $BOARD_WORKERS cells at a time; only the cells written there come back, and --collect puts them among
    the board's cells here."""
    script = _gpu_piece_in(tmp_path / "repo")
    repo = tmp_path / "repo"
    cells = repo / "docs" / "leaderboard" / "chomsky" / "cells"
    cells.mkdir(parents=True)
    (cells / "old__cell.json").write_text('{"status": "ok", "old": true}')
    env, out = _device_with_fake_python(
        tmp_path, FAKE_BOARD_PYTHON.replace("/tmp/board-arguments-$PPID", str(tmp_path / "args")), BOARD_WORKERS="16")
    result = subprocess.run(["bash", script, "2", "board"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    arguments = (tmp_path / "args").read_text().split()
    assert arguments[:4] == ["-m", "lengthgen.commands.main", "leaderboard", "--protocol"]
    assert "--workers" in arguments and arguments[arguments.index("--workers") + 1] == "16"
    with tarfile.open(fileobj=io.BytesIO(b"".join((out / p).read_bytes() for p in sorted(os.listdir(out))))) as tar:
        assert sorted(n for n in tar.getnames() if n.endswith(".json")) == ["board/cells/new__cell.json"]

    (cells / "new__cell.json").unlink()
    collected = subprocess.run(["bash", script, "--collect", str(out)], capture_output=True, text=True, check=True)
    assert "board: 1 cells" in collected.stdout
    assert sorted(os.listdir(cells)) == ["new__cell.json", "old__cell.json"]
    assert json.loads((cells / "old__cell.json").read_text())["old"]


@pytest.mark.parametrize("argv, out, message", [
    (["60", "a", "b", "c", "d", "e"], "x", "one to 4 presets side by side, not 5"),
    (["60", "a"], None, "$OUT"),
    (["ten", "a"], "x", "SECONDS must be a positive whole number, not 'ten'"),
    (["--collect", "no-such-folder"], None, "--collect needs the folder"),
    (["--travel"], None, "--travel takes the GPU command's one to 4 presets, not 0"),
])
def test_gpu_piece_mistakes_get_one_line_and_status_2(tmp_path, argv, out, message):
    """Nothing is installed or trained when the command line is wrong: one line naming the problem, exit status 2."""
    script = _gpu_piece_in(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "OUT"} | ({"OUT": str(tmp_path / out)} if out else {})
    result = subprocess.run(["bash", script, *argv], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1


def test_listops_errors_groups_by_root_operation_and_depth_as_counted_by_hand():
    """benchmarks/listops_errors.py: the root operation is the problem's first word, and each group's accuracy is its
    right answers over its problems (four hand-made rows: SM right and wrong at depth 2, MIN right at 1 and 2)."""
    listops_errors = benchmark("listops_errors")

    assert listops_errors.root_operation("[SM [MIN 1 2 ] 3 ]") == "SM"
    with pytest.raises(ValueError, match="not a ListOps problem"):
        listops_errors.root_operation("[ADD 1 2 ]")
    rows = [{"input": "[SM [MIN 1 2 ] 3 ]", "target": "4", "difficulty": 2},
            {"input": "[SM [MAX 1 2 ] 3 ]", "target": "5", "difficulty": 2},
            {"input": "[MIN 7 2 ]", "target": "2", "difficulty": 1},
            {"input": "[MIN [SM 4 4 ] 9 ]", "target": "8", "difficulty": 2}]
    result = listops_errors.accuracy_by_group(rows, ["4", "0", "2", "8"])
    assert result["all"] == {"accuracy": 0.75, "count": 4}
    assert result["operation"] == {"MIN": {"accuracy": 1.0, "count": 2}, "SM": {"accuracy": 0.5, "count": 2}}
    assert result["depth"] == {"1": {"accuracy": 1.0, "count": 1}, "2": {"accuracy": 2 / 3, "count": 3}}
    assert result["operation_depth"]["SM/2"] == {"accuracy": 0.5, "count": 2}



def test_leaderboard_step_counts_flops_and_times_the_bare_and_the_runner_step(tmp_path):
    leaderboard_step = benchmark("leaderboard_step")
    output = tmp_path / "step.json"
    results = leaderboard_step.main(["--models", "lstm", "nope", "--train_size", "200", "--steps", "2", "--repeats",
                                     "1", "--runner_steps", "3", "--json", str(output)])
    assert set(results["models"]) == {"lstm", "nope"}
    for entry in results["models"].values():
        assert entry["flops_per_step"] > 0 and entry["bare_seconds_per_step"] > 0
        assert entry["gflops_per_second"] == pytest.approx(
            entry["flops_per_step"] / entry["bare_seconds_per_step"] / 1e9
        )
        assert entry["runner_over_bare"] == pytest.approx(
            entry["runner_seconds_per_step"] / entry["bare_seconds_per_step"]
        )
        assert isinstance(entry["runner_fixed_seconds"], float)  # 3 and 6 steps: per step, and what is paid once
    # a transformer step does more arithmetic than an LSTM step of the same width
    assert results["models"]["nope"]["flops_per_step"] > results["models"]["lstm"]["flops_per_step"]
    assert json.loads(output.read_text())["models"].keys() == results["models"].keys()


FAKE_CHECKS_PYTHON = """#!/usr/bin/env bash
# python3 as gpu_piece.sh calls it for `checks`: pip installs nothing; each check records its arguments, writes the
# JSON it is asked for, and the FSDP test fails
[[ "$2" == "pip" ]] && exit 0
echo "$@" >> CALLS
for ((i = 1; i < $#; i++)); do [[ "${!i}" == --json ]] && j=$((i + 1)) && echo '{"gpu": "fake"}' > "${!j}"; done
[[ "$*" == *fsdp* ]] && { echo "1 failed"; exit 1; }
echo "checked $1"
"""


def test_gpu_piece_checks_run_one_after_the_other_and_collect_files_their_json(tmp_path):
    """`checks` runs the nine GPU checks in turn (alone: with a preset beside it, a usage error); a failing one is
    named and fails the command (here the FSDP test), the others still run; their logs and JSONs come back and
    --collect puts the JSONs in docs/ and prints the logs."""
    script = _gpu_piece_in(tmp_path / "repo")
    repo = tmp_path / "repo"
    (repo / "docs").mkdir()
    env, out = _device_with_fake_python(tmp_path, FAKE_CHECKS_PYTHON.replace("CALLS", str(tmp_path / "calls")))
    (tmp_path / "bin" / "ncu").write_text(f'#!/usr/bin/env bash\necho "ncu $*" >> {tmp_path / "calls"}\n')
    (tmp_path / "bin" / "ncu").chmod(0o755)  # Nsight Compute: records how it was asked to run the benchmark
    alone = subprocess.run(["bash", script, "60", "checks", "board"], env=env, capture_output=True, text=True)
    assert alone.returncode == 2 and "checks runs alone" in alone.stderr
    result = subprocess.run(["bash", script, "60", "checks"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    calls = (tmp_path / "calls").read_text().splitlines()
    first = [call.split()[0] for call in calls]
    assert first == ["tests/triton_interpreter_checks.py", "benchmarks/ndr_attention.py", "benchmarks/ndr_attention.py",
                     "benchmarks/ndr_attention.py", "ncu", "benchmarks/ndr_attention.py", "benchmarks/ndr_attention.py",
                     "-m", "benchmarks/recurrence_generation.py"]
    assert "--lengths 16 64 256 1024 4096 8192" in calls[1] and "--forward_only" in calls[2]
    assert "--profile" in calls[3] and "--triton_configs 16x2 16x8 32x4 32x8" in calls[5]
    assert "--kernel-name regex:_(forward|backward)_kernel" in calls[4]
    assert "python3 benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 4096" in calls[4]
    assert "--pytorch_max 4096" in calls[1]  # the PyTorch path measured again up to 4,096, as docs/results/speed.md
    assert "--end_to_end" in calls[6] and "--device cuda --dtype bfloat16" in calls[6]
    assert "-k fsdp_launch_on_gpus" in calls[7]
    assert "fsdp: exit status 1" in result.stdout and "generation: exit status 0" in result.stdout
    with tarfile.open(fileobj=io.BytesIO(b"".join((out / p).read_bytes() for p in sorted(os.listdir(out))))) as tar:
        names = sorted(tar.getnames())
    assert "checks/ndr_attention_gpu_bf16_linear.json" in names and "checks/recurrence_generation_gpu.json" in names
    assert "checks/ndr_attention_gpu_bf16_launch.json" in names
    assert "checks/ndr_attention_gpu_bf16_forward.json" in names
    assert "checks/ndr_attention_gpu_bf16_profile.json" in names and "checks/ndr_end_to_end_gpu_bf16.json" in names
    assert "checks/fsdp.log" in names and "checks/ncu.log" in names

    collected = subprocess.run(["bash", script, "--collect", str(out)], capture_output=True, text=True, check=True)
    assert "1 failed" in collected.stdout
    assert json.loads((repo / "docs" / "recurrence_generation_gpu.json").read_text()) == {"gpu": "fake"}
    assert (repo / "docs" / "ndr_attention_gpu_bf16_linear.json").exists()


def test_synthetic_secret_loss_splits_first_mentions_from_later_ones_with_an_overlap():
    """The secret after a document's first `key` is unknowable; every later one was stated before, in an earlier
    window or, with an overlap, earlier in the same window. A model that knows the secret exactly where it was stated
    before (and is uniform elsewhere) has loss ln V on first mentions and about 0 on later ones, though with an
    overlap of 8 the first window of 32 tokens holds two mentions."""
    import math
    import random
    from types import SimpleNamespace

    import torch

    synthetic = benchmark("recurrence_synthetic")
    args = synthetic.parse_args(["--overlap", "8"])
    documents = [synthetic.secret_document(random.Random(seed), args) for seed in range(5)]
    tokenizer = synthetic.word_tokenizer([synthetic.KEY] + [f"s{i}" for i in range(args.num_secrets)]
                                         + [f"w{i}" for i in range(args.num_filler_words)])
    key_id = tokenizer.convert_tokens_to_ids(synthetic.KEY)
    in_first_window = 0

    def model(ids):
        keys = (ids[0] == key_id).nonzero().flatten().tolist()
        nonlocal in_first_window
        in_first_window += sum(k + 1 < args.window_size for k in keys[1:])
        logits = torch.zeros(1, ids.shape[1], len(tokenizer))
        for k in keys[1:]:  # after a later `key`: the secret, certain
            logits[0, k, ids[0, k + 1]] = 100.0
        return SimpleNamespace(logits=logits)

    model.config = SimpleNamespace(window_size=args.window_size)
    assert synthetic.secret_token_loss(model, tokenizer, documents, True) == pytest.approx(math.log(len(tokenizer)))
    assert synthetic.secret_token_loss(model, tokenizer, documents, False) == pytest.approx(0, abs=1e-6)
    assert in_first_window >= 1  # a later mention inside the first window, counted among the later ones
