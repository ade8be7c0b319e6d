"""Training in pieces on machines that do not outlive a piece.

A run that must proceed in pieces of under ten minutes (a GPU machine held for minutes, a preemptible job) needs two
things the Trainer does not have:

* `TimeBudgetCallback`: stop cleanly before a wall-clock budget ends, with a checkpoint written at the step where it
  stops (weights, optimizer, scheduler, RNG states and the data position, which the Trainer keeps as the global step
  and skips to on resume). The next piece resumes from it and follows the same curve as an uninterrupted run.
* `pack_checkpoint` / `unpack_checkpoint`: a checkpoint folder (a dozen files: weights, optimizer, model code,
  tokenizer, ...) as at most `max_parts` files of at most `part_bytes` each, and back, byte for byte. The run's best
  checkpoint so far (`load_best_model_at_end`) travels with it, without its optimizer state: the Trainer forgets a
  best checkpoint that is not on the machine, and would end the run with its last model instead.

Every command takes the budget as `--max_train_seconds` (lengthgen.training.arguments).
"""

import glob
import io
import json
import os
import pickletools
import tarfile
import time
import zipfile

from transformers import TrainerCallback
from transformers.trainer_utils import IntervalStrategy, get_last_checkpoint

from .results import written_whole

PART_BYTES = 16 * 1024 * 1024
MAX_PARTS = 8
# what only resuming from a checkpoint needs: left out of the best checkpoint that travels beside the last one
TRAINING_STATE_FILES = ("optimizer.pt", "scheduler.pt", "scaler.pt", "rng_state")


class TimeBudgetCallback(TrainerCallback):
    """Stop training, saving a checkpoint, when the next step and a save would no longer fit `seconds`.

    The budget counts from the start of training (`on_train_begin`). After each step the callback compares the time
    left with twice the longest interval between two step ends seen so far (an interval that held an evaluation or a
    save counts as it was) and stops when it would not fit. A resumed run starts from the longest evaluation its log
    history records (per step, its splits' runtimes summed). A run that evaluates but has no evaluation on record
    yet (a first piece) evaluates once at its start, as `eval_on_start` does (no best model chosen, nothing saved),
    so that the first step's interval holds what an evaluation costs: no piece starts an evaluation it cannot
    finish. Under `save_strategy="best"` the step it stops at is saved without its evaluation, which would let the
    Trainer save it only as a new best (the next piece evaluates at its next evaluation step). `clock` is for tests.
    """

    def __init__(self, seconds: float, clock=None):
        if seconds <= 0:
            raise ValueError(f"max_train_seconds must be positive, got {seconds}.")
        self.seconds, self.clock = seconds, clock or time.monotonic
        self.stopped_at = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = self.last = self.clock()
        self.longest = longest_evaluation(state.log_history)
        # the Trainer reads eval_on_start right after this call; set back after the first step
        self.measuring = not self.longest and args.eval_strategy != IntervalStrategy.NO and not getattr(
            args, "eval_on_start", False)
        if self.measuring:
            args.eval_on_start = True

    def on_step_end(self, args, state, control, **kwargs):
        now = self.clock()
        self.longest = max(self.longest, now - self.last)
        self.last = now
        if now - self.start + 2 * self.longest > self.seconds and state.global_step < state.max_steps:
            control.should_save = True
            control.should_training_stop = True
            if args.save_strategy == "best":  # which saves after an evaluation only a new best: the next piece's start
                control.should_evaluate = False
            self.stopped_at = state.global_step
        self._give_back_eval_on_start(args)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self._give_back_eval_on_start(args)  # a run of no step

    def _give_back_eval_on_start(self, args):
        if self.measuring:  # as given, for the checkpoints' training arguments and the next piece
            args.eval_on_start, self.measuring = False, False


def longest_evaluation(log_history: list[dict]) -> float:
    """Seconds of the longest evaluation a Trainer's log history records: at each step the runtimes of its evaluations
    (`eval_runtime`, or one `eval_<split>_runtime` per split) summed; 0 without any."""
    per_step = {}
    for entry in log_history:
        seconds = sum(value for key, value in entry.items() if key.startswith("eval_") and key.endswith("_runtime"))
        per_step[entry.get("step")] = per_step.get(entry.get("step"), 0.0) + seconds
    return max(per_step.values(), default=0.0)


def pack_checkpoint(checkpoint_dir: str, target_dir: str, extra_files=(), part_bytes: int = PART_BYTES,
                    max_parts: int = MAX_PARTS) -> list[str]:
    """Write `checkpoint_dir` (and `extra_files`, stored by base name beside it) as one tar archive cut into parts of at
    most `part_bytes`: `target_dir/<checkpoint name>.tar.part00`, `.part01`, ... The best checkpoint its
    trainer_state.json names (`best_global_step`), where it is another folder beside it, goes into the archive too,
    less its optimizer, scheduler and RNG states. Once every part is written, what it supersedes in `target_dir` is
    removed: a part left over from an earlier packing of this checkpoint (it would be read as the archive's tail) and
    the archives of this run's earlier checkpoints (the run's folder, as their `training_args.bin` records it), so
    that the folder keeps one archive per run, within `max_parts`; another run's archive stays. Returns the parts'
    paths; raises ValueError, writing nothing, when more than `max_parts` would be needed."""
    buffer = io.BytesIO()
    name = os.path.basename(os.path.normpath(checkpoint_dir))
    best = best_checkpoint_beside(checkpoint_dir)
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(checkpoint_dir, arcname=name)
        if best:
            tar.add(best, arcname=os.path.basename(best),
                    filter=lambda info: None if os.path.basename(info.name).startswith(TRAINING_STATE_FILES) else info)
        for path in extra_files:
            tar.add(path, arcname=os.path.basename(path))
    data = buffer.getvalue()
    count = max(1, -(-len(data) // part_bytes))
    if count > max_parts:
        raise ValueError(f"{checkpoint_dir} packs into {len(data) / 2**20:.1f} MiB: {count} parts of "
                         f"{part_bytes / 2**20:.0f} MiB, more than {max_parts}.")
    os.makedirs(target_dir, exist_ok=True)
    paths = []
    for index in range(count):
        path = os.path.join(target_dir, f"{name}.tar.part{index:02d}")
        with written_whole(path, "wb") as f:
            f.write(data[index * part_bytes : (index + 1) * part_bytes])
        paths.append(path)
    run, step = os.path.basename(os.path.dirname(os.path.abspath(checkpoint_dir))), _step(name)
    runs = {}  # the run folder of each earlier archive, read once
    for stale in sorted(set(glob.glob(os.path.join(target_dir, "checkpoint-*.tar.part*"))) - set(paths)):
        other = os.path.basename(stale).split(".tar.part")[0]
        if other != name and _step(other) < step and other not in runs:
            try:
                with joined_archive(target_dir, other) as archive:
                    runs[other] = packed_run_folder(archive)
            except ValueError:  # parts that do not join: not known to be this run's
                runs[other] = None
        if other == name or (_step(other) < step and runs[other] == run):
            os.remove(stale)
    return paths


def _step(checkpoint_name: str) -> int:
    return int(checkpoint_name.rsplit("-", 1)[1])


def best_checkpoint_beside(checkpoint_dir: str) -> str | None:
    """The folder of the best checkpoint that `checkpoint_dir`'s trainer state records, when it is another folder
    beside it; None otherwise (no best kept, or the best is this checkpoint)."""
    state_file = os.path.join(checkpoint_dir, "trainer_state.json")
    if not os.path.exists(state_file):
        return None
    with open(state_file) as f:
        step = json.load(f).get("best_global_step")
    if not step:
        return None
    best = os.path.join(os.path.dirname(os.path.normpath(checkpoint_dir)), f"checkpoint-{step}")
    return best if os.path.isdir(best) and not os.path.samefile(best, checkpoint_dir) else None


def packed_step(parts_dir: str) -> int:
    """The training step of the latest checkpoint `pack_checkpoint` wrote in `parts_dir`."""
    parts = glob.glob(os.path.join(parts_dir, "checkpoint-*.tar.part*"))
    if not parts:
        raise FileNotFoundError(f"No packed checkpoint (checkpoint-N.tar.partNN) in {parts_dir}.")
    return max(_step(os.path.basename(p).split(".tar.part")[0]) for p in parts)


def get_last_checkpoint_or_none(output_dir: str) -> str | None:
    """The run folder's latest `checkpoint-N` folder; None where the folder or a checkpoint in it does not exist."""
    return get_last_checkpoint(output_dir) if os.path.isdir(output_dir) else None


def unpack_unless_behind(parts_dir: str, output_dir: str) -> str | None:
    """`unpack_checkpoint`, unless `output_dir` holds a checkpoint of its own at the piece's step or later (a run
    resumed here, say): the restored checkpoint folder, or None where the run's own was kept. A run's older
    checkpoints stay beside a restored one; the Trainer resumes from the latest."""
    own = get_last_checkpoint_or_none(output_dir)
    if own is not None and int(own.rsplit("-", 1)[1]) >= packed_step(parts_dir):
        return None
    return unpack_checkpoint(parts_dir, output_dir)


def packed_archive(parts_dir: str) -> tarfile.TarFile:
    """The archive of the latest checkpoint `pack_checkpoint` wrote in `parts_dir`, its parts joined; ValueError when
    they do not join into one (a part missing or cut short)."""
    return joined_archive(parts_dir, f"checkpoint-{packed_step(parts_dir)}")


def joined_archive(parts_dir: str, checkpoint_name: str) -> tarfile.TarFile:
    """The archive of `checkpoint_name` (`checkpoint-N`) in `parts_dir`, its parts joined; ValueError when they do
    not join into one."""
    parts = sorted(glob.glob(os.path.join(parts_dir, checkpoint_name + ".tar.part*")))
    data = b"".join(open(p, "rb").read() for p in parts)
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r")
        archive.getmembers()  # reads to the end: a truncated archive fails here, not halfway through extracting
    except (tarfile.TarError, EOFError) as error:
        raise ValueError(f"The parts of {checkpoint_name} in {parts_dir} ({len(parts)} file(s)) do not join into a "
                         f"checkpoint archive: a part is missing or cut short ({error}).") from None
    return archive


def packed_run_folder(archive: tarfile.TarFile) -> str | None:
    """The name of the output folder the run of a packed checkpoint (`packed_archive`) trained in, as its
    `training_args.bin` records it, read without unpickling (no code in the file runs); None where it has none."""
    name = next((n for n in archive.getnames() if n.endswith("/training_args.bin")), None)
    if name is None:
        return None
    with zipfile.ZipFile(archive.extractfile(name)) as saved:  # torch.save's zip layout: <folder>/data.pkl
        pickled = saved.read(next(n for n in saved.namelist() if n.endswith("data.pkl")))
    strings = [arg for opcode, arg, _ in pickletools.genops(pickled) if isinstance(arg, str)]
    for key, value in zip(strings, strings[1:]):
        if key == "output_dir":
            return os.path.basename(os.path.normpath(value))
    return None


def packed_file(archive: tarfile.TarFile, name: str) -> bytes | None:
    """The file `name` packed beside a checkpoint (`pack_checkpoint`'s `extra_files`), None where it was not."""
    return archive.extractfile(name).read() if name in archive.getnames() else None


def unpack_checkpoint(parts_dir: str, output_dir: str) -> str:
    """Join the parts `pack_checkpoint` wrote in `parts_dir` (the latest checkpoint's, when several are there) and
    extract them into `output_dir` (the best checkpoint beside it, where one was packed: the Trainer finds it there by
    its step at the next save); returns the restored checkpoint folder."""
    archive = packed_archive(parts_dir)
    os.makedirs(output_dir, exist_ok=True)
    with archive:
        archive.extractall(output_dir, filter="data")
    return os.path.join(output_dir, f"checkpoint-{packed_step(parts_dir)}")
