"""What an experiment returns and leaves in its output folder: `ExperimentResult`, written as `lengthgen_results.json`.

    result = run_experiment(spec)                 # lengthgen.training.runner
    result.scores["test"]["9"]["accuracy"]        # per split, per difficulty (and "all"): accuracy, token_accuracy,
                                                  # ece, examples (lengthgen.data.scoring)
    result.table()                                # {"test": {"all": 0.98, "9": 0.99, "10": 0.97}, ...}
    ExperimentResult.load("outputs/ndr-ctl")      # the same, read back from the folder

The file also records the spec that ran (only what differs from the defaults), the command that ran it, where
training stopped and the hardware; `lengthgen release` builds a model card from it.
"""

import contextlib
import dataclasses
import json
import os
import shlex
import tempfile
from dataclasses import dataclass, field

RESULTS_FILE = "lengthgen_results.json"
PLOT = "accuracy.png"  # the accuracy-against-difficulty plot a release folder carries
# the papers of lengthgen's model types, for the cards
PAPERS = {
    "ndr": "Csordás, Irie and Schmidhuber, *The Neural Data Router: Adaptive Control Flow in Transformers Improves "
    "Systematic Generalization*, ICLR 2022 (arXiv:2110.07732)",
    "inductive_bert": "Nam, Seo, Mailthody, Michael and Li, *I-BERT: Inductive Generalization of Transformer to "
    "Arbitrary Context Lengths* (arXiv:2006.10220, 2020)",
    "universal_transformer": "Dehghani, Gouws, Vinyals, Uszkoreit and Kaiser, *Universal Transformers*, ICLR 2019 "
    "(arXiv:1807.03819)",
    "lstm_classifier": "Abnar, Dehghani and Zuidema, *Transferring Inductive Biases through Knowledge Distillation* "
    "(arXiv:2006.00555, 2020)",
}
# window-level recurrence, for every family it wraps
RECURRENCE_PAPER = ("Yoshida, Ettinger and Gimpel, *Adding Recurrence to Pretrained Transformers for Improved "
                    "Efficiency and Context Size* (arXiv:2008.07027, 2020)")
# the Hub's pipeline tag of each head
PIPELINE_TAGS = {"classification": "text-classification", "masked_lm": "fill-mask", "answer_slots": "fill-mask"}


@dataclass
class ExperimentResult:
    scores: dict  # {split: {difficulty or "all": {"accuracy", "token_accuracy", "examples"[, "ece"]}}}, str keys
    head: str
    model_type: str | None
    spec: dict  # the spec's sections, what differs from the defaults
    command: str | None = None  # the command line that ran it, without its wall-clock budget
    metrics: dict = field(default_factory=dict)  # the Trainer's metrics of training and of the final evaluations
    training: dict | None = None  # steps, epochs, best_step, seconds, first and last loss, max_train_seconds
    evaluation_seconds: float = 0.0
    parameters: int = 0
    hardware: dict = field(default_factory=dict)
    trained_by: dict | None = None  # an evaluation of a trained folder: that folder's spec, command and training

    def table(self, metric: str = "accuracy") -> dict:
        """{split: {"all": value, difficulty: value}} of one score (accuracy: the whole answer right)."""
        return {split: {key: entry[metric] for key, entry in table.items() if metric in entry}
                for split, table in self.scores.items()}

    def markdown_table(self, metric: str = "accuracy") -> list[str]:
        """The scores as the lines of a Markdown table for model cards: per split, each difficulty in order, then all
        its examples."""
        lines = ["| split | difficulty | accuracy |", "| --- | --- | --- |"]
        for split, table in self.table(metric).items():
            lines += [f"| {split} | {key} | {table[key]:.4f} |"
                      for key in sorted(table, key=lambda k: (k == "all", k.zfill(4)))]
        return lines

    def task_sentence(self, detail: str = "") -> str:
        """What the model was trained on, for model cards: the dataset, its config and what a length split is;
        `detail` goes before the full stop."""
        dataset = self.dataset
        return (f"`{dataset['name']}`" + (f" / `{dataset['config']}`" if dataset["config"] else "")
                + ", a task split by length or depth: the evaluation splits are longer or deeper than anything seen in "
                + f"training{detail}.")

    def summary(self, metric: str = "accuracy") -> str:
        """The scores as a few lines for a terminal: per split, the score over all its examples, then per
        difficulty."""
        table = self.table(metric)
        width = max((len(split) for split in table), default=0)
        lines = [f"{metric} per split: over all examples | per difficulty"]
        for split, row in table.items():
            parts = [f"{key} {value:.3f}" for key, value in row.items() if key != "all"]
            overall = [f"all {row['all']:.3f}"] if "all" in row else []
            lines.append(f"  {split:<{width}}  " + " | ".join(overall + (["  ".join(parts)] if parts else [])))
        return "\n".join(lines)

    @property
    def dataset(self) -> dict:
        """The dataset the model was evaluated on: {"name", "config", "params"}."""
        data = self.spec.get("data", {})
        return {"name": data.get("dataset_name"), "config": data.get("dataset_config_name"),
                "params": data.get("dataset_param", {})}

    def save(self, output_dir: str) -> str:
        path = os.path.join(output_dir, RESULTS_FILE)
        with written_whole(path) as f:
            json.dump(dataclasses.asdict(self), f, indent=2)
        return path

    @classmethod
    def load(cls, path: str) -> "ExperimentResult":
        """The result in an output folder (or the file itself)."""
        if os.path.isdir(path):
            path = os.path.join(path, RESULTS_FILE)
        with open(path) as f:
            return cls(**json.load(f))


def without_time_budget(argv: list[str]) -> tuple[list[str], float | None]:
    """`argv` without `--max_train_seconds` (a session's wall-clock budget, not part of the recipe) and that budget."""
    budget, rest = None, []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--max_train_seconds":
            budget = float(next(arguments))
        elif argument.startswith("--max_train_seconds="):
            budget = float(argument.partition("=")[2])
        else:
            rest.append(argument)
    return rest, budget


def command_line(program: str, argv: list[str]) -> str:
    """`program argv...` as a shell command, without its wall-clock budget."""
    return f"{program} {shlex.join(without_time_budget(argv)[0])}".strip()


@contextlib.contextmanager
def written_whole(path: str, mode: str = "w"):
    """A file to write that replaces `path` whole when the block ends without an error (a temporary file beside it,
    renamed over it): processes writing the same file (shards ending together), or a run stopped midway, never leave
    it half-written."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=os.path.basename(path) + ".",
                                         suffix=".tmp")
    try:
        with os.fdopen(handle, mode, **({} if "b" in mode else {"newline": ""})) as f:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(f.fileno(), 0o666 & ~umask)  # as open() would make it (mkstemp's is private)
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        raise


__all__ = ["ExperimentResult", "PAPERS", "PIPELINE_TAGS", "PLOT", "RESULTS_FILE", "command_line", "without_time_budget",
           "written_whole"]
