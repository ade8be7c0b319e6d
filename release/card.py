"""The model card of a release folder: model-index results, the training range, the paper, usage, the command and the
spec that trained it."""

from lengthgen.data.export import params_as_list, parse_params, train_difficulties
from lengthgen.presets import dump_yaml
from lengthgen.training.results import PAPERS, PIPELINE_TAGS, PLOT, ExperimentResult

TASK_NAMES = {"text-classification": "Text Classification", "fill-mask": "Fill-Mask"}


def eval_results(result: ExperimentResult):
    """huggingface_hub EvalResults: accuracy overall and per difficulty, for every evaluated split."""
    from huggingface_hub import EvalResult

    task, dataset = PIPELINE_TAGS[result.head], result.dataset
    results = []
    for split, table in result.table().items():
        for key in ["all"] + sorted((k for k in table if k != "all"), key=int):
            results.append(EvalResult(
                task_type=task,
                task_name=TASK_NAMES.get(task, task),
                dataset_type=dataset["name"],
                dataset_name=f"{dataset['name']} ({dataset['config']})" if dataset["config"] else dataset["name"],
                dataset_config=dataset["config"],
                dataset_split=split,
                metric_type="accuracy",
                metric_name="accuracy" if key == "all" else f"accuracy, difficulty {key}",
                metric_value=round(float(table[key]), 4),
            ))
    return results


def model_card(repo_id: str, config: dict, result: ExperimentResult, has_plot: bool):
    from huggingface_hub import ModelCard, ModelCardData

    name, dataset = repo_id.split("/")[-1], result.dataset
    params = parse_params(dataset["params"])
    trained_on = train_difficulties(dataset["name"], dataset["config"], params)
    origin = result.trained_by or {"spec": result.spec, "command": result.command, "training": result.training}
    measured = result.spec.get("data", {})  # the evaluation's data arguments: which rows the results scored
    data = ModelCardData(
        model_name=name,
        library_name="transformers",
        license="apache-2.0",
        tags=["lengthgen", "length-generalization", config["model_type"]],
        datasets=[dataset["name"]],
        metrics=["accuracy"],
        pipeline_tag=PIPELINE_TAGS[result.head],
        eval_results=eval_results(result),
        # the training split's difficulty range (digits, depth, length): the Space app shows it beside each problem
        **({"train_difficulties": list(trained_on)} if trained_on else {}),
        # the generating parameters the run overrode: the evaluation splits can be generated again from the card
        **({"dataset_params": params_as_list(params)} if params else {}),
        # results measured on the first N rows of each split (--max_eval_samples), and on N training rows drawn
        # with seed 0 (--eval_train_samples) from the first --max_train_samples: `lengthgen verify` scores the same
        **({"eval_rows": measured["max_eval_samples"]} if measured.get("max_eval_samples") else {}),
        **({"eval_train_rows": measured["eval_train_samples"]} if measured.get("eval_train_samples") else {}),
        **({"train_rows": measured["max_train_samples"]}
           if measured.get("eval_train_samples") and measured.get("max_train_samples") else {}),
    )
    auto_class = next(k for k in config["auto_map"] if k != "AutoConfig")
    lines = [
        "---", data.to_yaml(), "---", "",
        f"# {name}", "",
        f"`{config['architectures'][0]}` (`{config['model_type']}`) trained with lengthgen on "
        + result.task_sentence(f" (training difficulties {trained_on[0]}-{trained_on[1]})" if trained_on else ""),
    ]
    if config["model_type"] in PAPERS:
        lines += ["", f"Paper: {PAPERS[config['model_type']]}."]
    lines += [
        "", "## Use", "", "```python",
        f"from transformers import {auto_class}, AutoTokenizer",
        f'model = {auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)   # or `import lengthgen.modeling`',
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}")',
        "```", "", "## Results", "", *result.markdown_table(),
    ]
    if has_plot:
        lines += ["", f"![accuracy against length or depth]({PLOT})"]
    lines += ["", "## Training", ""]
    if origin.get("command"):
        lines += ["```bash", origin["command"], "```", ""]
    lines += ["The spec it ran (`lengthgen train spec.yaml` runs it again):", "", "```yaml",
              dump_yaml(origin["spec"]).strip(), "```"]
    training = origin.get("training") or {}
    if training.get("steps"):
        budget = (
            " under a wall-clock budget (`--max_train_seconds`, left out above: a session it stops resumes from its "
            "last checkpoint when the same command is given again)" if training.get("max_train_seconds") else ""
        )
        lines += ["", f"Trained {training['steps']:,} steps{budget}."]
    if training.get("best_step") and training["best_step"] != training.get("steps"):
        lines += ["", f"The weights are step {training['best_step']:,}'s, the best checkpoint on validation "
                  "(`load_best_model_at_end`)."]
    if result.trained_by and result.command:
        lines += ["", "The results above were measured by evaluating the trained model again:", "", "```bash",
                  result.command, "```"]
    num_steps = result.spec.get("model", {}).get("num_steps")
    if num_steps:
        lines += ["", f"The results were measured with {num_steps} steps of the shared layer; config.json's "
                  f"`num_steps` is set to that (training used {config.get('num_layers')})."]
    return ModelCard("\n".join(lines) + "\n")
