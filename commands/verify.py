"""`lengthgen verify`: score a release folder again, with transformers alone, and compare with its model card.

    lengthgen verify checkpoints/ndr-ctl-backward --split test --without_lengthgen
    lengthgen verify checkpoints/*/ --without_lengthgen
    lengthgen verify outputs/release/ndr-ctl-backward --rows rows.jsonl --split validation

Without `--rows`, the split is generated again by the lengthgen builder the card names, with the card's generating
parameters; `rows.jsonl` holds a split's rows (`input`, `target`) as the builders write them. `--without_lengthgen`
makes lengthgen's model code unimportable before anything is loaded, so only the code shipped in the folder runs (as
on a machine without lengthgen). Prints, for each folder, the split, the rows, the measured and the stated accuracy as
one JSON line; exits with status 2, naming the folders, when any differ by more than the card's rounding.
"""

import argparse
import json
import os

from lengthgen.cli import ArgumentParser, UsageError
from lengthgen.release.verify import verify


def read_rows(path: str) -> list[dict]:
    """The rows of a JSON-lines file, each an object with the strings `input` and `target`; a UsageError naming the
    first line that is not."""
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise UsageError(f"--rows: line {number} of {path} is not JSON ({error.msg})") from None
            if not isinstance(row, dict) or not all(isinstance(row.get(key), str) for key in ("input", "target")):
                raise UsageError(f"--rows: line {number} of {path} is not an object with the strings input and "
                                 f"target: {line.strip()[:80]}")
            rows.append(row)
    if not rows:
        raise UsageError(f"--rows: {path} holds no rows")
    return rows


def main(argv=None):
    parser = ArgumentParser(prog="lengthgen verify", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", metavar="folder",
                        help="release folders (model, code, tokenizer, model card)")
    parser.add_argument("--rows", help="JSON lines with input and target (default: generate the card's split)")
    parser.add_argument("--split", help="the card's split to score (default: its test split, else validation)")
    parser.add_argument("--without_lengthgen", action="store_true", help="load only the code in the folder")
    args = parser.parse_args(argv)
    for folder in args.folders:
        if not os.path.isdir(folder):
            raise UsageError(f"{folder}: no such folder")
        if not os.path.isfile(os.path.join(folder, "README.md")):
            raise UsageError(f"{folder} holds no model card (README.md): not a release folder")
    rows = None
    if args.rows:
        if not os.path.isfile(args.rows):
            raise UsageError(f"--rows: no such file: {args.rows}")
        rows = read_rows(args.rows)
    reports = verify(args.folders, rows, args.split, args.without_lengthgen)
    for report in reports:
        print(json.dumps(report), flush=True)
    differ = [f"{r['folder']} (measured {r['measured']:.4f} on {r['split']}, the card states {r['card']:.4f})"
              for r in reports if not r["agrees"]]
    if differ:
        raise UsageError(f"not the card's accuracy: {'; '.join(differ)}")
    return reports
