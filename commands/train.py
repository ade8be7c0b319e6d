"""`lengthgen train`: train and evaluate one model on a length-split task, through the experiment runner.

    lengthgen train spec.yaml                                 # a spec file (lengthgen.training.spec)
    lengthgen train ndr-ctl-backward --max_steps 2000         # a reproduction preset's spec, a field changed
    lengthgen train --config_name hub_configs/ndr-ctl --dataset_name ctl --dataset_config_name backward \\
        --output_dir outputs/ndr-ctl --max_steps 2000          # the spec as flags
    lengthgen train spec.yaml --print_spec                    # the spec that would run, as YAML

Every field of a spec's sections is a flag of the same name: the model (`--config_name`, `--model_name_or_path`,
`--model_type`, `--config_overrides`, `--head`, `--num_steps`), the data (`--dataset_name`, `--dataset_config_name`,
`--dataset_param KEY=VALUE`, `--eval_train_samples`, ...), transformers' TrainingArguments (`--max_steps`,
`--learning_rate`, `--bf16`, ...) and distillation (`--teacher_model_name_or_path`, ...). Flags win over the spec;
`--dataset_param` and `--config_overrides` are merged into the spec's. `lengthgen train` trains and evaluates
(`--do_train false` only evaluates a `--model_name_or_path`). The output folder (default: outputs/NAME of the spec
file or preset) receives the model, `lengthgen_results.json` (accuracy per split and difficulty) and TensorBoard
logs; given again, the run resumes from its last checkpoint.
"""

import os
import sys

from lengthgen.cli import UsageError
from lengthgen.presets import load_yaml
from lengthgen.training.results import command_line
from lengthgen.training.runner import run_experiment
from lengthgen.training.spec import ExperimentSpec, parser


def base_spec(source: str) -> tuple[dict, str]:
    """The sections of a spec file or of a reproduction preset, and a name for its default output folder."""
    if os.path.isfile(source):
        with open(source) as f:
            sections = load_yaml(f.read())
        if not isinstance(sections, dict):
            raise UsageError(f"{source}: a spec is a mapping of sections (model, data, training, distillation).")
        return sections, os.path.splitext(os.path.basename(source))[0]
    from lengthgen.reproduction.reproduce import preset

    if source.endswith((".yaml", ".yml", ".json")):
        raise UsageError(f"no such spec file: {source}")
    return preset(source).sections(), source


def main(argv=None, head: str | None = None, program: str = "lengthgen train", train_and_evaluate: bool = True):
    """`program`'s command line (`argv`) run through the experiment runner. The example scripts call this with their
    `head` and without `train_and_evaluate`: there, as in transformers' examples, `--do_train` and `--do_eval` say
    what runs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    given = list(argv)
    if any(flag in argv for flag in ("-h", "--help")):
        print(__doc__ if program == "lengthgen train" else "")
        parser(program).print_help()
        return None
    print_spec = "--print_spec" in argv
    argv = [a for a in argv if a != "--print_spec"]
    sections, name, source = {}, None, "the spec"
    if argv and not argv[0].startswith("-"):
        sections, name = base_spec(argv[0])
        source, argv = argv[0], argv[1:]
    sections = {key: dict(value or {}) for key, value in sections.items()}
    if train_and_evaluate:
        sections.setdefault("training", {}).setdefault("do_train", True)
        sections["training"].setdefault("do_eval", True)
    if head:
        sections.setdefault("model", {}).setdefault("head", head)
    if name and "output_dir" not in sections.get("training", {}):
        sections.setdefault("training", {})["output_dir"] = os.path.join("outputs", name)
    spec = ExperimentSpec.from_args(argv, sections, prog=program, source=source)
    if print_spec:
        print(spec.to_yaml(), end="")
        return None
    if spec.training.output_dir in (None, "trainer_output") and not name:
        raise UsageError("--output_dir is required (where the model and its results go)")
    return run_experiment(spec, command=command_line(program, given))
