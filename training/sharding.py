"""Training sharded over many processes (FSDP or DeepSpeed ZeRO through accelerate, `accelerate launch --config_file
examples/accelerate/fsdp.yaml`, or `torchrun` with `--fsdp`): the launches refused before a model is loaded, and the
final model gathered into one ordinary checkpoint.

* `check_launch`: processes launched together must form one process group (an FSDP or multi-GPU config started on a
  machine without GPUs gives processes that each train alone and overwrite each other's output), and FSDP's
  activation checkpointing, which wraps every decoder layer, is refused for models that read windows: their own
  whole-window checkpointing (`--gradient_checkpointing`) keeps less and leaves the layers as they are.
* `shards_parameters`: whether the layers' parameters are gathered at every call of a layer (FSDP, DeepSpeed); then
  every process must make the same calls of the same shapes, in the same order, or the processes wait for each other
  forever: a model that reads windows pads every batch to the same number of windows (the longest training example)
  and evaluates in lockstep (`lengthgen.training.causal_lm`).
* `save_full_model`: checkpoints during training stay sharded (fast, resumable with `--resume_from_checkpoint`); the
  final model is gathered and saved as safetensors, so `from_pretrained` loads it on any number of devices.
"""

import os

from accelerate.utils import parse_flag_from_env, str_to_bool

from lengthgen.cli import UsageError


def fsdp_activation_checkpointing(training_args) -> bool:
    """Whether FSDP will checkpoint every wrapped layer: `fsdp_activation_checkpointing` of an accelerate config (the
    launcher's environment), or `activation_checkpointing` in `--fsdp_config`."""
    if training_args.fsdp:
        return str_to_bool(str((training_args.fsdp_config or {}).get("activation_checkpointing", False)), to_bool=True)
    return parse_flag_from_env("ACCELERATE_USE_FSDP") and parse_flag_from_env("FSDP_ACTIVATION_CHECKPOINTING")


def shards_parameters(training_args) -> bool:
    """Whether training runs under FSDP or DeepSpeed (through `--fsdp` / `--deepspeed` or an accelerate config)."""
    return bool(training_args.fsdp or training_args.deepspeed) or any(
        parse_flag_from_env(name) for name in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED"))


def check_launch(training_args, reads_windows: bool = False) -> None:
    """`UsageError` for a launch that would not train as asked (see the module's description). `reads_windows`: the
    model reads its input window by window and checkpoints whole windows itself."""
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size == 1:
        raise UsageError(f"{launched} processes were launched but form no process group, so each would train alone: "
                         "FSDP and multi-GPU launches need a GPU per process; on CPUs pass --use_cpu (data parallel, "
                         "or DeepSpeed ZeRO with a DeepSpeed config).")
    if reads_windows and fsdp_activation_checkpointing(training_args):
        raise UsageError("FSDP activation checkpointing is not supported for a model that reads windows: set "
                         "fsdp_activation_checkpointing: false and pass --gradient_checkpointing (whole windows).")


def save_full_model(trainer) -> None:
    """`trainer.save_model()`, with an FSDP model gathered into one full state dict first (with the sharded state-dict
    type, the Trainer would otherwise write no weights); checkpoints saved later would be full ones too."""
    if trainer.is_fsdp_enabled:
        trainer.accelerator.state.fsdp_plugin.set_state_dict_type("FULL_STATE_DICT")
    trainer.save_model()
