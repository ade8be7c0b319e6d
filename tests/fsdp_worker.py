"""A few training steps of a small causal LM with window-level recurrence, sharded with FSDP2 exactly as `accelerate
launch --config_file examples/accelerate/fsdp.yaml` shards it (accelerate's own `fsdp2_prepare_model` with the plugin
built from that file), on CPU processes talking over gloo; or, with one process and no config file, the same steps
unsharded, with gradient accumulation over the micro-batches the processes would each take.

    torchrun --nproc_per_node 2 tests/fsdp_worker.py --config_file examples/accelerate/fsdp.yaml RUN_DIR...
    python tests/fsdp_worker.py RUN_DIR...          # the reference: one process, no sharding

Each RUN_DIR holds the model to start from (model/) and the batches (batches.pt). Writes RUN_DIR/sharded/ (or
single/): steps.json (loss and gradient norm of each step, as the Trainer logs them: the mean over the global batch's
micro-batches of each one's mean loss; the names of the modules FSDP wrapped; the summed negative log-likelihood and
token count of the documents in RUN_DIR/documents.json read by `document_nll`) and model/ (the trained model, gathered
and saved with `save_pretrained` by the first process). Accelerate's `Accelerator` runs FSDP only on accelerators,
hence the stand-in below; the wrapping, the state-dict gathering and the model are the real ones."""

import json
import os
import sys
from types import SimpleNamespace

import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM

import lengthgen.modeling  # noqa: F401  (registers the recurrent models with the Auto classes)
from lengthgen.training.causal_lm import document_nll

LEARNING_RATE, MAX_GRAD_NORM = 1e-2, 1.0


def fsdp_plugin_from_config_file(path: str, num_processes: int):
    """The FullyShardedDataParallelPlugin that `accelerate launch --config_file path` gives each process: the launcher
    turns the file into FSDP_* environment variables (checking them as it does), which the plugin reads."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(["--config_file", path, "--num_processes", str(num_processes),
                                               "--mixed_precision", "no", "train.py"])
    args, _, _ = _validate_launch_command(args)
    if not args.use_fsdp:
        raise ValueError(f"{path} is not an FSDP config")
    env = prepare_multi_gpu_env(args)
    saved = dict(os.environ)
    try:  # the launcher's variables only while the plugin reads them
        os.environ.update({k: v for k, v in env.items() if k.startswith("FSDP_") or k == "ACCELERATE_USE_FSDP"})
        return FullyShardedDataParallelPlugin()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def padded(batch: dict, length: int) -> dict:
    """A micro-batch right-padded to `length` tokens (attention mask 0, label -100)."""
    extra = length - batch["input_ids"].shape[1]
    return {name: torch.nn.functional.pad(values, (0, extra), value=-100 if name == "labels" else 0)
            for name, values in batch.items()}


def train(run_dir: str, plugin, rank: int, world: int):
    """Train run_dir/model on run_dir/batches.pt (batches[s][m]: micro-batch m of global step s; with a plugin,
    process m takes micro-batch m), and write run_dir/{sharded,single}/steps.json and model/."""
    torch.manual_seed(0)
    start = os.path.join(run_dir, "model")
    model = AutoModelForCausalLM.from_pretrained(start)
    model.gradient_checkpointing_enable()  # --gradient_checkpointing: whole windows
    model.train()
    steps = torch.load(os.path.join(run_dir, "batches.pt"))
    wrapped = []
    if plugin is not None:
        from accelerate.utils.fsdp_utils import fsdp2_prepare_model
        from torch.distributed.fsdp import FSDPModule

        stand_in = SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin), mixed_precision="no",
                                   torch_device_mesh=None, device=torch.device("cpu"), is_main_process=rank == 0)
        model = fsdp2_prepare_model(stand_in, model)
        wrapped = [name for name, module in model.named_modules() if isinstance(module, FSDPModule)]
        if len(steps[0]) != world:
            raise ValueError(f"{len(steps[0])} micro-batches per step for {world} processes")
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.0)
    log = []
    for step in steps:
        mine = [step[rank]] if plugin is not None else step
        if plugin is not None:  # the same number of windows in every process, as the training collator pads them
            mine = [padded(batch, max(b["input_ids"].shape[1] for b in step)) for batch in mine]
        loss_sum = torch.zeros(())
        for batch in mine:
            loss = model(**batch).loss
            (loss / len(mine)).backward()
            loss_sum += loss.detach() / len(mine)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
        if plugin is not None:
            grad_norm = grad_norm.full_tensor()
            dist.all_reduce(loss_sum)
            loss_sum /= world
        optimizer.step()
        optimizer.zero_grad()
        log.append({"loss": float(loss_sum), "grad_norm": float(grad_norm)})
    # whole documents of different lengths, read window by window, each process its share, in lockstep when sharded
    documents = json.loads(open(os.path.join(run_dir, "documents.json")).read())
    longest_of_all = None
    if plugin is not None:
        def longest_of_all(length: int) -> int:
            length = torch.tensor([length])
            dist.all_reduce(length, op=dist.ReduceOp.MAX)
            return int(length)
    model.eval()
    totals = torch.tensor(document_nll(model, documents, 2, 12, model.config.overlap, (rank, world), longest_of_all),
                          dtype=torch.float64)
    if plugin is not None:
        dist.all_reduce(totals)
    if plugin is not None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    else:
        state = model.state_dict()
    if rank == 0:
        out = os.path.join(run_dir, "sharded" if plugin is not None else "single")
        AutoModelForCausalLM.from_pretrained(start).save_pretrained(os.path.join(out, "model"), state_dict=state)
        with open(os.path.join(out, "steps.json"), "w") as f:
            json.dump({"steps": log, "wrapped": wrapped, "documents": totals.tolist()}, f)


def main(argv: list[str]):
    config_file = None
    if argv[:1] == ["--config_file"]:
        config_file, argv = argv[1], argv[2:]
    rank, world, plugin = 0, 1, None
    if config_file is not None:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        plugin = fsdp_plugin_from_config_file(config_file, world)
    for run_dir in argv:
        # a new plugin per model: it keeps the decoder-layer class it found in the first
        train(run_dir, plugin and fsdp_plugin_from_config_file(config_file, world), rank, world)
    if config_file is not None:
        dist.barrier()
        dist.destroy_process_group()
        sys.stdout.flush()
        os._exit(0)  # gloo's threads may abort a normal interpreter exit after the work is done


if __name__ == "__main__":
    main(sys.argv[1:])
