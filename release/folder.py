"""A trained output directory -> a Hub-ready release folder (model, code, tokenizer, plot, model card)."""

import json
import os
import re
import shutil
import tempfile

from lengthgen.training.results import PLOT, RESULTS_FILE, ExperimentResult, written_whole

from .card import model_card
from .hub import NOT_UPLOADED, ReleaseError, check_push, upload

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
WEIGHTS, WEIGHTS_INDEX = "model.safetensors", "model.safetensors.index.json"


def weight_files(output_dir: str) -> list[str]:
    """The model's weights as `save_pretrained` wrote them: one `model.safetensors`, or (a model larger than
    `max_shard_size`) the index and every shard it names; [] when there are none."""
    if os.path.isfile(os.path.join(output_dir, WEIGHTS)):
        return [WEIGHTS]
    index = os.path.join(output_dir, WEIGHTS_INDEX)
    if not os.path.isfile(index):
        return []
    with open(index) as f:
        shards = sorted(set(json.load(f).get("weight_map", {}).values()))
    missing = [s for s in shards if not os.path.isfile(os.path.join(output_dir, s))]
    if not shards or missing:
        raise ReleaseError(f"{index} names {'no shard' if not shards else 'missing shards: ' + ', '.join(missing)}.")
    return [WEIGHTS_INDEX, *shards]


def read_output_dir(output_dir: str) -> tuple[dict, ExperimentResult]:
    """(config, results) of a trained output folder, or a ReleaseError naming what is missing."""
    if not os.path.isdir(output_dir):
        raise ReleaseError(f"{output_dir} is not a directory.")
    missing = [] if os.path.isfile(os.path.join(output_dir, "config.json")) else ["config.json"]
    missing += [] if weight_files(output_dir) else [WEIGHTS]
    if missing:
        raise ReleaseError(f"{output_dir} holds no trained model: {' and '.join(missing)} missing.")
    if not os.path.isfile(os.path.join(output_dir, RESULTS_FILE)):
        raise ReleaseError(f"{output_dir} has no {RESULTS_FILE}: it was not written by lengthgen's experiment runner "
                           "(lengthgen train, the example scripts, lengthgen reproduce).")
    result = ExperimentResult.load(output_dir)
    if not result.scores:
        raise ReleaseError(f"{output_dir}/{RESULTS_FILE} holds no evaluation (train with do_eval).")
    with open(os.path.join(output_dir, "config.json")) as f:
        config = json.load(f)
    if not config.get("auto_map"):
        raise ReleaseError(f"{output_dir}/config.json has no auto_map: the model code cannot travel with it.")
    base = (config.get("base_config") or {}).get("model_type")  # an answer-slots reader's base model
    if base is not None:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

        if base not in CONFIG_MAPPING_NAMES and not config["base_config"].get("auto_map"):
            raise ReleaseError(f"{output_dir} holds an answer-slots reader over {base} saved without {base}'s code: "
                               "load it with lengthgen and save it again (save_pretrained carries the base's code).")
    return config, result


def release(output_dir: str, repo_id: str, target: str | None = None, push: bool = False) -> str:
    """Write the Hub-ready folder of `output_dir` at `target` (default: ./NAME of the repo id); push it with `push`.

    Every check runs before anything is written; the folder is assembled in a temporary directory beside the target
    and moved into place only when complete, so a failure leaves no partial folder.
    """
    check_push(repo_id, push)
    config, result = read_output_dir(output_dir)
    target = os.path.abspath(target or repo_id.split("/")[-1])
    if os.path.exists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise ReleaseError(f"Target {target} is a file, not a folder." if not os.path.isdir(target)
                           else f"Target folder {target} exists and is not empty.")

    # the auto_map modules and their imports
    code_files = sorted(f for f in os.listdir(output_dir) if f.endswith(".py"))
    refs = [*config["auto_map"].values(), *((config.get("base_config") or {}).get("auto_map") or {}).values()]
    missing = {ref.split("--")[-1].split(".")[0] + ".py" for ref in refs} - set(code_files)
    if missing:
        raise ReleaseError(f"{output_dir} lacks the model code its auto_map names: {', '.join(sorted(missing))}.")
    files = ["config.json", *weight_files(output_dir), *code_files]
    files += [
        f for f in (*TOKENIZER_FILES, "generation_config.json", PLOT) if os.path.isfile(os.path.join(output_dir, f))
    ]
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".release-", dir=parent)
    try:
        for name in files:
            shutil.copy2(os.path.join(output_dir, name), os.path.join(staging, name))
        tokenizer_config = os.path.join(staging, "tokenizer_config.json")
        if os.path.isfile(tokenizer_config):  # transformers saves how it was loaded on this machine: not the Hub's
            with open(tokenizer_config) as f:
                settings = json.load(f)
            loaded_as = {key: settings.pop(key) for key in ("is_local", "local_files_only") if key in settings}
            if loaded_as:
                with written_whole(tokenizer_config) as f:
                    json.dump(settings, f, indent=2, ensure_ascii=False)
        num_steps = result.spec.get("model", {}).get("num_steps")
        if num_steps:  # the card's numbers were measured with this many steps: make it the default
            with open(os.path.join(staging, "config.json"), "w") as f:
                json.dump({**config, "num_steps": num_steps}, f, indent=2)
        model_card(repo_id, config, result, PLOT in files).save(os.path.join(staging, "README.md"))
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
    """A folder `release` wrote (or one shipped in checkpoints/): model (config and weights), code and a model card, no
    training outputs."""
    return os.path.isfile(os.path.join(folder, "README.md")) and os.path.isfile(os.path.join(folder, "config.json")) \
        and bool(weight_files(folder)) \
        and not any(os.path.isfile(os.path.join(folder, name)) for name in (RESULTS_FILE, "training_args.bin"))


def publish(folder: str, repo_id: str) -> str:
    """Upload a release folder to `repo_id` as it is (the checkpoints shipped in the repository go to the Hub
    unchanged), but for the repo id its card names in `from_pretrained("...")`: the card of a folder published under
    another name shows how to load it from `repo_id`."""
    check_push(repo_id, push=True)
    card_path = os.path.join(folder, "README.md")
    with open(card_path) as f:
        card = f.read()
    named = set(re.findall(r'from_pretrained\("([^"/\s]+/[^"/\s]+)"', card)) - {repo_id}
    if not named:
        upload(folder, repo_id)
        return folder
    staging = tempfile.mkdtemp(prefix=".release-")
    try:
        copy = os.path.join(staging, os.path.basename(os.path.normpath(folder)))
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(*NOT_UPLOADED))
        for old in named:
            card = card.replace(f'from_pretrained("{old}"', f'from_pretrained("{repo_id}"')
        with open(os.path.join(copy, "README.md"), "w") as f:
            f.write(card)
        upload(copy, repo_id)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
