"""The builders by name, their generating parameters checked, and a builder's data exported as a Hub-style dataset
folder (`lengthgen data export`).

    lengthgen data export nsp_inductive --output_dir data_out                  # every config
    lengthgen data export nsp_inductive --dataset_config_name add --output_dir data_out --dataset_param train_size=1000
    lengthgen data export ptb_inductive --dataset_config_name char --output_dir data_out \\
        --dataset_param source=/path/to/ptb

writes ``data_out/nsp_inductive/{config}/{split}-{fingerprint}.parquet`` (the first 16 hex digits of the rows'
fingerprint: ``datasets`` caches a folder's config by the folder's name and its files' names, so another export is
never served rows cached from an earlier one), ``{config}/generation.json`` (the generating parameters and the whole
fingerprint) and a README.md dataset card whose ``configs:`` header lets
``datasets.load_dataset("data_out/nsp_inductive", "add")`` read it, locally or once pushed to the Hub.
"""

import glob
import hashlib
import json
import os
import tempfile

from lengthgen.cli import UsageError

from .chomsky_hierarchy import ChomskyHierarchy
from .ctl import CTL
from .listops import ListOps
from .nsp_inductive import NSPInductive
from .ptb_inductive import PTBInductive
from .simple_arithmetic import SimpleArithmetic
from .subject_verb_agreement import SubjectVerbAgreement

BUILDERS = {
    "nsp_inductive": NSPInductive,
    "ptb_inductive": PTBInductive,
    "ctl": CTL,
    "simple_arithmetic": SimpleArithmetic,
    "listops": ListOps,
    "chomsky_hierarchy": ChomskyHierarchy,
    "subject_verb_agreement": SubjectVerbAgreement,
}


def fingerprint(dataset_dict) -> str:
    """sha256 over the rows of every split, serialised as canonical JSON: independent of parquet/arrow versions."""
    digest = hashlib.sha256()
    for split in sorted(dataset_dict):
        digest.update(split.encode())
        for row in dataset_dict[split]:
            digest.update(json.dumps(row, sort_keys=True, ensure_ascii=True).encode())
            digest.update(b"\n")
    return digest.hexdigest()


def builder_config(name: str, config_name: str | None = None):
    """The BuilderConfig `config_name` (default: the builder's default) of lengthgen builder `name`; ValueError listing
    the valid names for an unknown dataset or config."""
    if name not in BUILDERS:
        raise UsageError(f"Unknown dataset {name!r}; expected one of {', '.join(sorted(BUILDERS))}.")
    builder = BUILDERS[name]
    configs = {c.name: c for c in builder.BUILDER_CONFIGS}
    config_name = config_name or builder.DEFAULT_CONFIG_NAME or next(iter(configs))
    if config_name not in configs:
        raise UsageError(f"Unknown config {config_name!r} of {name}; expected one of {', '.join(configs)}.")
    return configs[config_name]


def _kind(default) -> str:
    if isinstance(default, tuple):
        return f"a list of {len(default)} " + ("integers" if all(isinstance(v, int) for v in default) else "values")
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(type(default), "a value")


def check_params(name: str, config_name: str | None, params: dict):
    """UsageError naming the generating parameter that `name` does not have, or whose value is of the wrong kind
    (compared with the config's default) or a negative size, before anything is generated."""
    known = builder_config(name, config_name).generator_arguments()
    for key, value in params.items():
        if key not in known:
            raise UsageError(f"{name} has no generating parameter {key!r}; its parameters: {', '.join(known)}.")
        default = known[key]
        if default is None:
            continue
        if isinstance(default, tuple):
            right = isinstance(value, (tuple, list)) and len(value) == len(default) and all(
                isinstance(v, type(d)) and not isinstance(v, bool) or type(v) is type(d)
                for v, d in zip(value, default)
            )
        elif isinstance(default, bool):
            right = isinstance(value, bool)
        elif isinstance(default, (int, float)):
            right = (
                isinstance(value, (int, float) if isinstance(default, float) else int)
                and not isinstance(value, bool)
            )
        else:
            right = isinstance(value, type(default))
        if not right:
            raise UsageError(f"Generating parameter {key} of {name} takes {_kind(default)} (default "
                             f"{json.dumps(list(default) if isinstance(default, tuple) else default)}), got {value!r}.")
        if key.endswith("_size") and value < 1:
            raise UsageError(f"Generating parameter {key} of {name} must be at least 1, got {value}.")


def build(name: str, config_name: str | None = None, cache_dir: str | None = None, **params):
    """Generate the splits of dataset `name`, config `config_name`, with generating `params` overridden (checked by
    the builder)."""
    builder_config(name, config_name)  # an unknown dataset or config named in one line
    builder = BUILDERS[name](config_name=config_name, cache_dir=cache_dir, **params)
    builder.download_and_prepare()
    return builder, builder.as_dataset()


def train_difficulties(name: str, config_name: str | None = None, params: dict | None = None) -> tuple[int, int] | None:
    """The (lowest, highest) difficulty of a lengthgen builder's training split with `params` overridden, read from
    its config without generating anything; None for a dataset that is not one of lengthgen's builders."""
    if name not in BUILDERS:
        return None
    config = builder_config(name, config_name)
    key = next(k for k in ("train_depths", "train_difficulties", "train_lengths") if hasattr(config, k))
    value = (params or {}).get(key, getattr(config, key))
    return None if value is None else (int(value[0]), int(value[1]))


COLUMNS = ("input", "target", "difficulty")  # every length split's rows: space-separated tokens, the split variable


def load_splits(name: str, config_name: str | None = None, params: dict | None = None):
    """A lengthgen builder's splits (generated with `params` overridden), or anything `datasets.load_dataset` reads
    (an exported folder, a Hub repository) when `name` is not one of lengthgen's builders."""
    if name in BUILDERS:
        return build(name, config_name, **(params or {}))[1]
    if params:
        raise UsageError("Generating parameters apply to lengthgen builders only: " + ", ".join(sorted(BUILDERS)))
    import datasets

    # datasets caches a local folder's configs by the folder's name and the config's, not by their files: another
    # export to a folder of the same name would be served the rows cached from the first, so a folder is read again
    mode = datasets.DownloadMode.FORCE_REDOWNLOAD if os.path.isdir(name) else None
    try:
        splits = datasets.load_dataset(name, config_name, download_mode=mode)
    except ValueError as error:  # a config the folder or repository does not have: datasets lists the ones it has
        if "BuilderConfig" not in str(error):
            raise
        raise UsageError(f"--dataset_config_name of {name}: {str(error).splitlines()[0]}") from error
    except datasets.exceptions.DatasetGenerationError as error:  # files that do not read as one table (a model folder)
        cause = str(error.__cause__ or error).splitlines()[0]
        raise UsageError(f"{name} does not read as a dataset: its files are not one table of rows (datasets: {cause})"
                         ) from error
    for split, rows in splits.items():
        if missing := [column for column in COLUMNS if column not in rows.column_names]:
            raise UsageError(f"{name}: split {split} lacks the column(s) {', '.join(missing)} (it has "
                             f"{', '.join(rows.column_names)}); a length split's rows have {', '.join(COLUMNS)}, as "
                             "`lengthgen data export` writes them.")
    return splits


def _card(name: str, folder: str, default_config: str) -> str:
    configs = sorted(c for c in os.listdir(folder) if os.path.isfile(os.path.join(folder, c, "generation.json")))
    default = default_config if default_config in configs else configs[0]
    lines = ["---", "configs:"]
    rows = []
    for config in configs:
        with open(os.path.join(folder, config, "generation.json")) as f:
            meta = json.load(f)
        lines.append(f"- config_name: {config}")
        lines.append("  data_files:")
        for split in meta["splits"]:  # the files as written (named by the rows' fingerprint, or by an older export)
            (path,) = glob.glob(os.path.join(folder, config, f"{split}-*.parquet"))
            lines += [f"  - split: {split}", f"    path: {config}/{os.path.basename(path)}"]
        if config == default:
            lines.append("  default: true")
        sizes = ", ".join(f"{s}: {n}" for s, n in meta["splits"].items())
        rows.append(f"| `{config}` | {sizes} | `{json.dumps(meta['parameters'])}` | `{meta['fingerprint']}` |")
    lines += ["---", "", f"# {name}", "", BUILDERS[name].__doc__.strip(), ""]
    lines += [
        "Generated by `lengthgen data export`. Columns: `input` and `target` (space-separated tokens), `difficulty`",
        "(the split variable), `length` (input tokens), plus task-specific ones. The same parameters give the same",
        "rows on any machine; the fingerprint is the sha256 of the rows as canonical JSON.",
        "",
        "| config | rows | generating parameters | fingerprint |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
    ]
    return "\n".join(lines)


def export(name: str, output_dir: str, config_names=None, push_to_hub: str | None = None, **params) -> str:
    """Write dataset `name` (all configs unless `config_names`) under `output_dir/name`; return that folder.

    Configs already exported there are kept and listed in the card. With `push_to_hub`, upload the folder to that
    dataset repository.
    """
    builder_config(name)  # an unknown dataset named before anything else
    config_names = list(config_names or [c.name for c in BUILDERS[name].BUILDER_CONFIGS])
    for config_name in config_names:  # every config and parameter checked before any is generated
        check_params(name, config_name, params)
    folder = os.path.join(output_dir, name)
    with tempfile.TemporaryDirectory() as cache_dir:
        for config_name in config_names:
            builder, splits = build(name, config_name, cache_dir=cache_dir, **params)
            meta = {
                "parameters": builder.config.generating_parameters(),
                "fingerprint": fingerprint(splits),
                "splits": {split: len(dataset) for split, dataset in splits.items()},
            }
            os.makedirs(os.path.join(folder, config_name), exist_ok=True)
            for stale in glob.glob(os.path.join(folder, config_name, "*.parquet")):  # an earlier export's rows
                os.remove(stale)
            for split, dataset in splits.items():
                dataset.to_parquet(os.path.join(folder, config_name, f"{split}-{meta['fingerprint'][:16]}.parquet"))
            with open(os.path.join(folder, config_name, "generation.json"), "w") as f:
                json.dump(meta, f, indent=2)
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write(_card(name, folder, BUILDERS[name].DEFAULT_CONFIG_NAME))
    if push_to_hub:
        from huggingface_hub import HfApi

        api = HfApi()
        api.create_repo(push_to_hub, repo_type="dataset", exist_ok=True)
        api.upload_folder(folder_path=folder, repo_id=push_to_hub, repo_type="dataset")
    return folder


GENERATED = [name for name in BUILDERS if name != "ptb_inductive"]  # the families generated here (PTB reads a corpus)


def export_suite(output_dir: str, push_to_hub: str | None = None, **params) -> list[str]:
    """Every generated task family (`GENERATED`), each with all its configs, as `export` writes one: a folder
    `output_dir/NAME` per family; return the folders. `params` set the generating parameters of every family that has
    them (`train_size=1000`); a parameter no family has is a UsageError. With `push_to_hub` (a user or organisation),
    each family goes to the dataset repository `push_to_hub/NAME`."""
    own = {name: builder_config(name).generator_arguments() for name in GENERATED}
    unused = [key for key in params if not any(key in known for known in own.values())]
    if unused:
        raise UsageError(f"--dataset_param {unused[0]}: no generated task family has this generating parameter.")
    if push_to_hub is not None and ("/" in push_to_hub or not push_to_hub):
        raise UsageError(f"--push_to_hub with --all takes a user or organisation (each family becomes ORG/NAME), got "
                         f"{push_to_hub!r}.")
    chosen = {name: {key: value for key, value in params.items() if key in own[name]} for name in GENERATED}
    for name in GENERATED:  # every family's parameters checked before any is generated
        for config in BUILDERS[name].BUILDER_CONFIGS:
            check_params(name, config.name, chosen[name])
    return [export(name, output_dir, None, f"{push_to_hub}/{name}" if push_to_hub else None, **chosen[name])
            for name in GENERATED]


def parse_param(text: str) -> tuple:
    """`KEY=VALUE` as (key, value), the value read as JSON where it is JSON (`train_size=1000`, `test_lengths=[41,500]`,
    lists as tuples) and as a string otherwise (`source=/data/ptb`)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise UsageError(f"--dataset_param takes KEY=VALUE, got {text!r}")
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return key, tuple(parsed) if isinstance(parsed, list) else parsed


def parse_params(params) -> dict:
    """Generating parameters as one mapping, from a list of `KEY=VALUE` (a command line) or a mapping (a spec file, a
    model card): the one syntax of every command."""
    if isinstance(params, dict):
        return {key: tuple(value) if isinstance(value, list) else value for key, value in params.items()}
    return dict(parse_param(text) for text in params or [])


def params_as_list(params: dict) -> list[str]:
    """The mapping back as `KEY=VALUE` texts (JSON values), as a command line or a model card writes them."""
    return [f"{key}={json.dumps(list(value) if isinstance(value, tuple) else value)}" if not isinstance(value, str)
            else f"{key}={value}" for key, value in params.items()]
