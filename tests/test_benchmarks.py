import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import ibert_throughput  # noqa: E402


@pytest.mark.parametrize("padded", [[], ["--padded"]])
def test_throughput_harness_runs_every_model_at_every_length(padded):
    """The harness itself (no timing assertion): every model trains at every length and ratios are to BERT."""
    results = ibert_throughput.main(
        ["--hidden-size", "32", "--layers", "1", "--heads", "2", "--vocab-size", "50", "--lengths", "8", "12",
         "--batch-size", "2", "--steps", "1", "--warmup", "0", *padded]
    )
    assert sorted(results) == [8, 12]
    for r in results.values():
        assert set(r["sequences_per_second"]) == {"BERT", "I-BERT", "XLNet"}
        assert r["ratio_to_bert"]["BERT"] == 1.0
        assert all(v > 0 for v in r["sequences_per_second"].values())


def test_ndr_attention_harness_reports_time_and_memory_for_both_kinds():
    import ndr_attention

    results = ndr_attention.main(["--lengths", "8", "16", "--batch-size", "1", "--heads", "2", "--head-size", "8",
                                  "--repeats", "1", "--warmup", "0"])
    assert sorted(results) == [8, 16]
    for r in results.values():
        assert set(r["seconds"]) == set(r["peak_bytes"]) == {"geometric", "softmax (SDPA)"}
        assert all(v > 0 for v in r["seconds"].values()) and r["peak_bytes"]["geometric"] > 0


def test_ndr_ctl_harness_trains_both_models_and_reports_the_best_validation_checkpoint(tmp_path):
    import json

    import ndr_ctl_generalization

    output = tmp_path / "ctl.json"
    results = ndr_ctl_generalization.main(
        ["--train-size", "600", "--hidden-size", "16", "--num-layers", "2", "--eval-num-steps", "3", "--steps", "4",
         "--batch-size", "8", "--eval-every", "2", "--output", str(output)]
    )
    assert json.loads(output.read_text()) == results
    for name in ("ndr", "transformer"):
        best = results[name]
        assert best["step"] in (2, 4)
        assert set(best["test"]) == {"all", "9", "10"} and set(best["validation"]) == {"all", "6", "7", "8"}
        assert 0.0 <= best["test"]["all"] <= 1.0


def test_recurrence_memory_harness_runs_each_case_in_a_subprocess(tmp_path):
    import json

    import recurrence_memory

    output = tmp_path / "memory.json"
    results = recurrence_memory.main(
        ["--windows", "1", "3", "--window-size", "16", "--n-layer", "3", "--n-embd", "32", "--n-head", "2",
         "--vocab-size", "100", "--max-plain-windows", "1", "--throughput-windows", "2", "--repeats", "1",
         "--json", str(output)]
    )
    assert sorted(results["peak_bytes"]) == ["1,0", "1,1", "3,1"]  # no plain run past --max-plain-windows
    assert all(v >= 0 for v in results["peak_bytes"].values())
    assert set(results["tokens_per_second"]) == {"recurrent", "plain GPT-2"} and results["ratio"] > 0
    saved = json.loads(output.read_text())
    assert saved["peak_bytes"] == results["peak_bytes"] and saved["ratio"] == results["ratio"]
