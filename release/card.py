"""The model card of a release folder: model-index results, the training range, the paper, usage and the command."""

from .records import PLOT

TASK_NAMES = {"text-classification": "Text Classification", "fill-mask": "Fill-Mask"}
PAPERS = {
    "ndr": "Csordás, Irie, Schmidhuber, *The Neural Data Router: Adaptive Control Flow in Transformers Improves "
    "Systematic Generalization*, ICLR 2022",
    "inductive_bert": "Nam, Seo, Mailthody, Michael, Li, *I-BERT: Inductive Generalization of Transformer to "
    "Arbitrary Context Lengths*, 2020",
}


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
    if run.get("trained_steps"):
        budget = (" under a wall-clock budget (`--max_train_seconds`, left out above: a session it stops resumes from its "
                  "last checkpoint when the same command is given again)") if run.get("max_train_seconds") else ""
        lines += ["", f"Trained {run['trained_steps']:,} steps{budget}."]
    if run.get("best_step") and run["best_step"] != run.get("trained_steps"):
        lines += ["", f"The weights are step {run['best_step']:,}'s, the best checkpoint on validation "
                  "(`--load_best_model_at_end`)."]
    if run.get("evaluation_command"):
        lines += ["", "The results above were measured by evaluating the trained model again:", "", "```bash",
                  run["evaluation_command"], "```"]
    if run.get("num_steps"):
        lines += ["", f"The results were measured with {run['num_steps']} steps of the shared layer; config.json's "
                  f"`num_steps` is set to that (training used {config.get('num_layers')})."]
    if run.get("reproduce_command"):
        lines += ["", f"The same run, with its results JSON and plot: `{run['reproduce_command']}`."]
    return ModelCard("\n".join(lines) + "\n")
