#!/usr/bin/env python
"""Training throughput of I-BERT vs. BERT (and XLNet) of the same size, measured in one process.

For each sequence length, the models take turns (A, B, C, A, B, C, ...) running full training steps (forward,
backward, Adam update) on the same random batch, so a noisy shared machine slows them alike; the median step time
of each gives sequences per second, and the ratios to BERT are printed.

    python benchmarks/ibert_throughput.py                         # base size (paper Table 1), lengths 64 and 256
    python benchmarks/ibert_throughput.py --hidden_size 256 --layers 4 --heads 4 --steps 3
    python benchmarks/ibert_throughput.py --padded      # rows of random length in [L/2, L], right-padded to L

    python benchmarks/ibert_throughput.py --device cuda --bf16 --batch_size 64 --lengths 128 512 --no_xlnet

Paper (Titan V, PTB char): I-BERT 72, BERT 88, XLNet 35 sequences/s, i.e. I-BERT = 0.82x BERT.

Model FLOPs utilisation (MFU): the FLOPs of one training step (forward + backward, counted by
`torch.utils.flop_counter.FlopCounterMode`, plus the LSTM's products; the optimizer's few left out) per median step
time, as a fraction of the GPU's datasheet dense bf16 peak and of the rate of a large bf16 matrix product measured in
this process.
"""

import argparse
import json
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import BertConfig, BertForMaskedLM, XLNetConfig, XLNetLMHeadModel

from lengthgen.modeling import IBertConfig, IBertForMaskedLM
from lengthgen.training.hardware import hardware
from lengthgen.training.results import written_whole


def build_models(args):
    size = dict(hidden_size=args.hidden_size, num_hidden_layers=args.layers, num_attention_heads=args.heads,
                intermediate_size=4 * args.hidden_size, vocab_size=args.vocab_size)
    models = {
        "BERT": BertForMaskedLM(BertConfig(**size, max_position_embeddings=max(512, max(args.lengths)))),
        "I-BERT": IBertForMaskedLM(IBertConfig(**size)),
    }
    if not args.no_xlnet:
        models["XLNet"] = XLNetLMHeadModel(
            XLNetConfig(vocab_size=args.vocab_size, d_model=args.hidden_size, n_layer=args.layers, n_head=args.heads,
                        d_inner=4 * args.hidden_size)
        )
    return models


def make_batch(args, length, generator):
    """Random ids with a fixed 15% of positions masked; labels only there (and XLNet's two-stream targets)."""
    input_ids = torch.randint(5, args.vocab_size, (args.batch_size, length), generator=generator)
    num_masked = max(1, int(0.15 * length))
    masked = torch.stack(
        [torch.randperm(length, generator=generator)[:num_masked].sort().values for _ in range(args.batch_size)]
    )
    labels = torch.full_like(input_ids, -100).scatter(1, masked, input_ids.gather(1, masked))
    masked_inputs = input_ids.scatter(1, masked, 4)
    attention_mask = torch.ones_like(input_ids)
    if args.padded:  # real lengths uniform in [L/2, L]
        lengths = torch.randint(length // 2, length + 1, (args.batch_size,), generator=generator)
        lengths[0] = length
        attention_mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
        labels = labels.masked_fill(attention_mask == 0, -100)
    is_masked = labels != -100
    # XLNet: no token may see a masked token's content; predict the masked positions from the query stream
    perm_mask = is_masked[:, None, :].expand(-1, length, -1).float()
    target_mapping = torch.nn.functional.one_hot(masked, length).float()
    return {
        "mlm": {"input_ids": masked_inputs, "attention_mask": attention_mask, "labels": labels},
        "xlnet": {"input_ids": masked_inputs, "attention_mask": attention_mask, "perm_mask": perm_mask,
                  "target_mapping": target_mapping, "labels": input_ids.gather(1, masked)},
    }


# dense bf16 tensor-core peaks from NVIDIA's datasheets (SXM parts), FLOP/s
DATASHEET_BF16_PEAK = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12}


def forward_backward(model, inputs, bf16=False):
    """The loss under bf16 autocast (when asked) and its gradients."""
    with torch.autocast(inputs["input_ids"].device.type, torch.bfloat16, enabled=bf16):
        loss = model(**inputs).loss
    loss.backward()


def training_step(model, optimizer, inputs, bf16=False):
    forward_backward(model, inputs, bf16)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if inputs["input_ids"].device.type == "cuda":
        torch.cuda.synchronize()


def step_flops(model, inputs, bf16=False) -> int:
    """FLOPs of one forward + backward pass: matrix products and attention counted by PyTorch, plus the recurrent
    layers' products (cuDNN's RNN kernels are not counted), 2 per weight and token forward and 4 backward."""
    with FlopCounterMode(display=False) as counter:
        forward_backward(model, inputs, bf16)
    model.zero_grad(set_to_none=True)
    recurrent_weights = sum(p.numel() for m in model.modules() if isinstance(m, torch.nn.RNNBase)
                            for name, p in m.named_parameters() if name.startswith("weight"))
    return counter.get_total_flops() + 6 * recurrent_weights * inputs["input_ids"].numel()


def matmul_rate(device: str, size: int = 8192, repeats: int = 10) -> float:
    """FLOP/s of a size^3 bf16 matrix product on this device, the mean of `repeats` after 3 warm-ups."""
    a, b = (torch.randn(size, size, device=device, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.cuda.synchronize()
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def datasheet_peak(device: str) -> float | None:
    name = torch.cuda.get_device_name() if device == "cuda" else ""
    return next((peak for key, peak in DATASHEET_BF16_PEAK.items() if key in name), None)


def measure(args):
    torch.manual_seed(0)
    models = {name: model.to(args.device) for name, model in build_models(args).items()}
    optimizers = {name: torch.optim.Adam(model.parameters(), lr=1e-5) for name, model in models.items()}
    results = {}
    for length in args.lengths:
        batch = make_batch(args, length, torch.Generator().manual_seed(length))
        batch = {kind: {k: v.to(args.device) for k, v in inputs.items()} for kind, inputs in batch.items()}
        times = {name: [] for name in models}
        for step in range(args.warmup + args.steps):
            for name, model in models.items():
                model.train()
                inputs = batch["xlnet"] if name == "XLNet" else batch["mlm"]
                start = time.perf_counter()
                training_step(model, optimizers[name], inputs, args.bf16)
                if step >= args.warmup:
                    times[name].append(time.perf_counter() - start)
        seconds = {name: statistics.median(t) for name, t in times.items()}
        seqs_per_s = {name: args.batch_size / s for name, s in seconds.items()}
        flops = {name: step_flops(model, batch["xlnet"] if name == "XLNet" else batch["mlm"], args.bf16)
                 for name, model in models.items()}
        results[length] = {
            "sequences_per_second": seqs_per_s,
            "ratio_to_bert": {name: v / seqs_per_s["BERT"] for name, v in seqs_per_s.items()},
            "flops_per_step": flops,
            "flops_per_second": {name: flops[name] / s for name, s in seconds.items()},
        }
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden_size", type=int, default=768)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab_size", type=int, default=10_000, help="PTB word vocabulary size")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--padded", action="store_true", help="rows of random length in [L/2, L], right-padded")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--bf16", action="store_true", help="train under bf16 autocast")
    parser.add_argument("--no_xlnet", action="store_true")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    for flag in ("hidden_size", "layers", "heads", "batch_size", "steps", "threads"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag} must be at least 1, got {value}")
    if args.warmup < 0:
        parser.error(f"--warmup must be at least 0, got {args.warmup}")
    if min(args.lengths) < 1:
        parser.error(f"--lengths must each be at least 1, got {min(args.lengths)}")
    if args.vocab_size < 6:  # the random tokens are drawn from id 5 up (4 is the mask)
        parser.error(f"--vocab_size must be at least 6, got {args.vocab_size}")
    if args.threads:
        torch.set_num_threads(args.threads)
    results = measure(args)
    peaks = {}
    if args.device == "cuda":
        peaks = {"datasheet bf16": datasheet_peak(args.device), "measured bf16 matmul": matmul_rate(args.device)}
    for r in results.values():
        r["mfu"] = {f"of {kind}": {name: rate / peak for name, rate in r["flops_per_second"].items()}
                    for kind, peak in peaks.items() if peak}
    print(f"training sequences/s, hidden {args.hidden_size}, {args.layers} layers, batch {args.batch_size}, "
          f"{args.device}{' bf16 autocast' if args.bf16 else ' fp32'}, {torch.get_num_threads()} threads, "
          f"median of {args.steps} steps{', padded rows' if args.padded else ''}")
    for length, r in results.items():
        cells = "  ".join(f"{n} {v:7.2f} ({r['ratio_to_bert'][n]:.2f}x, {r['flops_per_second'][n] / 1e12:.1f} TFLOP/s)"
                          for n, v in r["sequences_per_second"].items())
        print(f"length {length:>4}: {cells}")
        for kind, by_model in r["mfu"].items():
            print(f"  MFU {kind}: " + "  ".join(f"{n} {v:.3f}" for n, v in by_model.items()))
    if peaks:
        print("peaks (TFLOP/s): " + ", ".join(f"{k} {v / 1e12:.0f}" for k, v in peaks.items() if v))
    if args.json:
        with written_whole(args.json) as f:
            json.dump({"args": vars(args), "hardware": hardware(), "peaks": peaks, "results": results}, f, indent=2)
    return results


if __name__ == "__main__":
    main()
