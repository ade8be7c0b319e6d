"""Turn a trained output directory into a Hub-ready model folder, and push it: the `lengthgen-release` command.

    lengthgen-release outputs/reproduce/ndr-ctl-backward --repo-id you/ndr-ctl-backward            # -> ./ndr-ctl-backward
    lengthgen-release outputs/reproduce/ndr-ctl-backward --repo-id you/ndr-ctl-backward --target release/ndr --push
    lengthgen-release checkpoints/ndr-ctl-backward --repo-id you/ndr-ctl-backward --push     # a release folder, as is

The output directory is what `examples/run_classification.py` or `examples/run_mlm.py` wrote (with `--do_eval`):
`config.json` with its `auto_map`, `model.safetensors`, the model code that `save_pretrained` copied, tokenizer files,
`all_results.json` (the evaluation) and `lengthgen_run.json` (the command and the dataset, see `record_run`);
`benchmarks/reproduce.py` adds `accuracy.png`. The release folder holds the model, its code, the tokenizer, the plot
and a model card whose YAML carries `model-index` results (task, dataset and config, split, accuracy overall and per
depth or length) so the Hub displays them, plus the exact training command. `--push` uploads it with huggingface_hub.

Bad input stops before anything is written or uploaded, with one line naming the problem: an output directory with no
trained model or no evaluation results, a target folder that exists and is not empty, `--push` without a Hub token.
"""

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile

RUN_RECORD = "lengthgen_run.json"
PLOT = "accuracy.png"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
TASK_NAMES = {"text-classification": "Text Classification", "fill-mask": "Fill-Mask"}
PAPERS = {
    "ndr": "Csordás, Irie, Schmidhuber, *The Neural Data Router: Adaptive Control Flow in Transformers Improves "
    "Systematic Generalization*, ICLR 2022",
    "inductive_bert": "Nam, Seo, Mailthody, Michael, Li, *I-BERT: Inductive Generalization of Transformer to "
    "Arbitrary Context Lengths*, 2020",
}


class ReleaseError(ValueError):
    """A release that cannot be made; the message is one line naming the problem."""


def record_run(output_dir: str, script: str, argv: list[str] | None, data_args, task: str):
    """Write `lengthgen_run.json` in an example script's output directory: how the model was trained, for the card."""
    argv = sys.argv[1:] if argv is None else argv
    record = {
        "command": f"python {script} {shlex.join(argv)}",
        "task": task,
        "dataset": data_args.dataset_name,
        "dataset_config": data_args.dataset_config_name,
        "dataset_params": list(data_args.dataset_param),
        "eval_num_steps": getattr(data_args, "eval_num_steps", None),  # the NDR's steps at evaluation
    }
    with open(os.path.join(output_dir, RUN_RECORD), "w") as f:
        json.dump(record, f, indent=2)


def record_evaluation(output_dir: str, trained_dir: str, script: str, argv: list[str] | None, data_args):
    """Write `lengthgen_run.json` for an evaluation-only run of the trained folder `trained_dir` (its own record, when
    it has one, plus this evaluation's command and number of NDR steps): the output directory then releases as that
    model with the numbers measured here."""
    source = os.path.join(trained_dir, RUN_RECORD)
    if not os.path.isfile(source):
        return
    with open(source) as f:
        record = json.load(f)
    argv = sys.argv[1:] if argv is None else argv
    record.update(evaluation_command=f"python {script} {shlex.join(argv)}",
                  eval_num_steps=getattr(data_args, "eval_num_steps", None))
    with open(os.path.join(output_dir, RUN_RECORD), "w") as f:
        json.dump(record, f, indent=2)


def accuracy_tables(metrics: dict) -> dict:
    """{split: {"all": accuracy, difficulty: accuracy}} from the example scripts' metrics: `eval_{split}_accuracy[_dN]`
    (run_classification) or `eval_{split}_sequence_accuracy[_dN]` (run_mlm, whole masked span exact)."""
    tables = {}
    for key, value in metrics.items():
        if not key.startswith("eval_"):
            continue
        for stem in ("_sequence_accuracy", "_accuracy"):
            split, found, rest = key[len("eval_"):].partition(stem)
            if found and "token" not in split:
                if rest == "":
                    tables.setdefault(split, {})["all"] = value
                elif rest.startswith("_d") and rest[2:].isdigit():
                    tables.setdefault(split, {})[rest[2:]] = value
                break
    return tables


def read_output_dir(output_dir: str) -> tuple[dict, dict, dict]:
    """(config, run record, accuracy tables) of a trained output directory, or a ReleaseError naming what is missing."""
    if not os.path.isdir(output_dir):
        raise ReleaseError(f"{output_dir} is not a directory.")
    missing = [f for f in ("config.json", "model.safetensors") if not os.path.isfile(os.path.join(output_dir, f))]
    if missing:
        raise ReleaseError(f"{output_dir} holds no trained model: {' and '.join(missing)} missing.")
    if not os.path.isfile(os.path.join(output_dir, "all_results.json")):
        raise ReleaseError(f"{output_dir} has no results: all_results.json missing (train with --do_eval).")
    with open(os.path.join(output_dir, "all_results.json")) as f:
        tables = accuracy_tables(json.load(f))
    if not tables:
        raise ReleaseError(f"{output_dir}/all_results.json holds no evaluation accuracy.")
    if not os.path.isfile(os.path.join(output_dir, RUN_RECORD)):
        raise ReleaseError(f"{output_dir} has no {RUN_RECORD}: it was not written by a lengthgen example script.")
    with open(os.path.join(output_dir, "config.json")) as f:
        config = json.load(f)
    if not config.get("auto_map"):
        raise ReleaseError(f"{output_dir}/config.json has no auto_map: the model code cannot travel with it.")
    with open(os.path.join(output_dir, RUN_RECORD)) as f:
        run = json.load(f)
    return config, run, tables


def eval_results(run: dict, tables: dict):
    """huggingface_hub EvalResults: accuracy overall and per difficulty, for every evaluated split."""
    from huggingface_hub import EvalResult

    metric = "sequence accuracy" if run["task"] == "fill-mask" else "accuracy"
    results = []
    for split, table in tables.items():
        for key in ["all"] + sorted((k for k in table if k != "all"), key=int):
            results.append(
                EvalResult(
                    task_type=run["task"],
                    task_name=TASK_NAMES.get(run["task"], run["task"]),
                    dataset_type=run["dataset"],
                    dataset_name=f"{run['dataset']} ({run['dataset_config']})" if run["dataset_config"] else run["dataset"],
                    dataset_config=run["dataset_config"],
                    dataset_split=split,
                    metric_type="accuracy",
                    metric_name=metric if key == "all" else f"{metric}, difficulty {key}",
                    metric_value=round(float(table[key]), 4),
                )
            )
    return results


def run_train_difficulties(run: dict) -> list[int] | None:
    """[lowest, highest] difficulty of the training split the run record names (a lengthgen builder with the run's
    generating parameters); None for other datasets."""
    from lengthgen.data.export import parse_param, train_difficulties

    params = dict(parse_param(p) for p in run.get("dataset_params", []))
    found = train_difficulties(run["dataset"], run["dataset_config"], params)
    return None if found is None else list(found)


def model_card(repo_id: str, config: dict, run: dict, tables: dict, has_plot: bool):
    from huggingface_hub import ModelCard, ModelCardData

    name = repo_id.split("/")[-1]
    trained_on = run_train_difficulties(run)
    data = ModelCardData(
        model_name=name,
        library_name="transformers",
        license="apache-2.0",
        tags=["lengthgen", "length-generalization", config["model_type"]],
        datasets=[run["dataset"]],
        metrics=["accuracy"],
        pipeline_tag=run["task"],
        eval_results=eval_results(run, tables),
        # the training split's difficulty range (digits, depth, length): the Space app shows it beside each problem
        **({"train_difficulties": trained_on} if trained_on else {}),
        # the generating parameters the run overrode: the evaluation splits can be generated again from the card
        **({"dataset_params": list(run["dataset_params"])} if run.get("dataset_params") else {}),
    )
    auto_class = next(k for k in config["auto_map"] if k != "AutoConfig")
    lines = [
        "---", data.to_yaml(), "---", "",
        f"# {name}", "",
        f"`{config['architectures'][0]}` (`{config['model_type']}`) trained with "
        f"lengthgen on `{run['dataset']}` / `{run['dataset_config']}`, a task split by "
        "length or depth: the evaluation splits are longer or deeper than anything seen in training"
        + (f" (training difficulties {trained_on[0]}-{trained_on[1]})." if trained_on else "."),
    ]
    if config["model_type"] in PAPERS:
        lines += ["", f"Paper: {PAPERS[config['model_type']]}."]
    lines += [
        "", "## Use", "", "```python",
        f"from transformers import {auto_class}, AutoTokenizer",
        f'model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)   # or `import lengthgen.modeling`',
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}")',
        "```", "", "## Results", "",
        "| split | difficulty | accuracy |", "| --- | --- | --- |",
    ]
    for split, table in tables.items():
        lines += [f"| {split} | {key} | {table[key]:.4f} |" for key in sorted(table, key=lambda k: (k == "all", k.zfill(4)))]
    if has_plot:
        lines += ["", f"![accuracy against length or depth]({PLOT})"]
    lines += ["", "## Training", "", "```bash", run["command"], "```"]
    if run.get("evaluation_command"):
        lines += ["", "The results above were measured by evaluating the trained model again:", "", "```bash",
                  run["evaluation_command"], "```"]
    if run.get("eval_num_steps"):
        lines += ["", f"The results were measured with {run['eval_num_steps']} steps of the shared layer; config.json's "
                  f"`num_steps` is set to that (training used {config.get('num_layers')})."]
    if run.get("reproduce_command"):
        lines += ["", f"The same run, with its results JSON and plot: `{run['reproduce_command']}`."]
    return ModelCard("\n".join(lines) + "\n")


def hub_token() -> str | None:
    from huggingface_hub import get_token

    return get_token()


def check_push(repo_id: str, push: bool):
    """ReleaseError for a repo id that is not ORG/NAME, or for `push` without a Hub token; before anything is written."""
    if "/" not in repo_id or repo_id.count("/") > 1 or not all(repo_id.split("/")):
        raise ReleaseError(f"--repo-id must be ORG/NAME, got {repo_id!r}.")
    if push and not hub_token():
        raise ReleaseError("--push needs a Hugging Face token: run `hf auth login` or set HF_TOKEN.")


def upload(folder: str, repo_id: str):
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, exist_ok=True)
    api.upload_folder(repo_id=repo_id, folder_path=folder, commit_message="lengthgen-release")


def release(output_dir: str, repo_id: str, target: str | None = None, push: bool = False) -> str:
    """Write the Hub-ready folder of `output_dir` at `target` (default: ./NAME of the repo id); push it with `push`.

    Every check runs before anything is written; the folder is assembled in a temporary directory beside the target
    and moved into place only when complete, so a failure leaves no partial folder.
    """
    check_push(repo_id, push)
    config, run, tables = read_output_dir(output_dir)
    target = os.path.abspath(target or repo_id.split("/")[-1])
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise ReleaseError(f"Target folder {target} exists and is not empty.")

    code_files = sorted(f for f in os.listdir(output_dir) if f.endswith(".py"))  # the auto_map modules and their imports
    missing = {ref.split("--")[-1].split(".")[0] + ".py" for ref in config["auto_map"].values()} - set(code_files)
    if missing:
        raise ReleaseError(f"{output_dir} lacks the model code its auto_map names: {', '.join(sorted(missing))}.")
    files = ["config.json", "model.safetensors", *code_files]
    files += [f for f in (*TOKENIZER_FILES, "generation_config.json", PLOT) if os.path.isfile(os.path.join(output_dir, f))]
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".release-", dir=parent)
    try:
        for name in files:
            shutil.copy2(os.path.join(output_dir, name), os.path.join(staging, name))
        if run.get("eval_num_steps"):  # the card's numbers were measured with this many steps: make it the default
            with open(os.path.join(staging, "config.json"), "w") as f:
                json.dump({**config, "num_steps": run["eval_num_steps"]}, f, indent=2)
        model_card(repo_id, config, run, tables, PLOT in files).save(os.path.join(staging, "README.md"))
        if os.path.isdir(target):
            os.rmdir(target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if push:
        upload(target, repo_id)
    return target


def is_release_folder(folder: str) -> bool:
    """A folder `release` wrote (or one shipped in checkpoints/): model, code and a model card, no training outputs."""
    return os.path.isfile(os.path.join(folder, "README.md")) and os.path.isfile(os.path.join(folder, "config.json")) \
        and not os.path.isfile(os.path.join(folder, RUN_RECORD))


def publish(folder: str, repo_id: str) -> str:
    """Upload a release folder to `repo_id` as it is (the checkpoints shipped in the repository go to the Hub
    unchanged)."""
    check_push(repo_id, push=True)
    upload(folder, repo_id)
    return folder


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lengthgen-release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", help="a trained output directory of run_classification.py or run_mlm.py, or a "
                        "release folder to upload unchanged with --push")
    parser.add_argument("--repo-id", required=True, help="ORG/NAME of the model repository on the Hub")
    parser.add_argument("--target", help="folder to write (default: ./NAME); must not exist or be empty")
    parser.add_argument("--push", action="store_true", help="upload the folder to --repo-id")
    args = parser.parse_args(argv)
    try:
        if os.path.isdir(args.output_dir) and is_release_folder(args.output_dir):
            if not args.push or args.target:
                raise ReleaseError(f"{args.output_dir} is already a release folder: upload it as it is with --push "
                                   "(and no --target).")
            folder = publish(args.output_dir, args.repo_id)
        else:
            folder = release(args.output_dir, args.repo_id, args.target, args.push)
    except ReleaseError as error:
        parser.exit(2, f"lengthgen-release: error: {error}\n")
    print(folder)  # no return value: the console script would pass it to sys.exit (exit status 1)


if __name__ == "__main__":
    main()
