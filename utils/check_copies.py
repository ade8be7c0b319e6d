"""Check that the code copied between the model folders still equals its source, and rewrite it with `--fix`.

Each folder under modeling/ loads on its own with `trust_remote_code` (`save_pretrained` ships the folder's files
next to the weights), so a helper that several models need exists once per folder. Every copy but one carries a
marker comment on the line above its `def` or `class` (or above its decorators), naming the source by its importable
dotted path, as transformers' utils/check_copies.py does:

    # Copied from lengthgen.modeling.ibert.modeling_ibert._values_are_free
    def _values_are_free(tensor: torch.Tensor) -> bool:

A copy that differs from its source only by names says so: `with Old->New` (several separated by commas, each
optionally followed by `all-casing` to replace the lower- and upper-case spellings too) is applied to the source's
text before the two are compared:

    # Copied from lengthgen.modeling.ibert.modeling_ibert._values_are_free with _values_are_free->values_are_free

The source is found by reading its file (`lengthgen.<package>.<module>` is <root>/<package>/<module>.py, as
pyproject.toml maps the packages) with `ast`, never by importing it; a dotted path into a class
(`module.Class.method`) names a method. The copy is the function or class right under the marker, through the last
line indented deeper than its `def`/`class` line.

The model code shipped in checkpoints/*/ (what runs with `trust_remote_code`) must equal the library's file of the
same name under modeling/; `--fix` copies the library's file there again.

Usage: python utils/check_copies.py [--root PATH] [--fix]
Prints one line per drifted copy (file:line, its source, then a short unified diff) and exits with status 1 when a
copy drifted or a marker names a source that does not exist; 0 when every copy matches. With `--fix` each drifted
copy is rewritten from its source (and each shipped checkpoint file from the library) and the status is 0 unless
something could not be fixed (a missing source).
"""

import argparse
import ast
import difflib
import os
import re
import shutil
import sys
import tokenize

MARKER = re.compile(r"^(?P<indent>[ \t]*)#\s*Copied from\s+lengthgen\.(?P<target>[\w.]+)(?P<rest>.*)$")
REPLACEMENT = re.compile(r"^(?P<old>\S+)->(?P<new>\S+)(?:\s+(?P<option>all-casing))?$")
SKIPPED_FOLDERS = {"tests", "checkpoints", "build", "dist", "node_modules", "__pycache__", "site-packages"}
DIFF_LINES = 20  # lines of a unified diff printed per drifted copy


class Problem:
    """A drifted copy (`fix` rewrites it) or a marker that cannot be checked (`fix` is None)."""

    def __init__(self, path, line, message, diff=(), fix=None):
        self.path, self.line, self.message, self.diff, self.fix = path, line, message, list(diff), fix

    def report(self, root):
        where = os.path.relpath(self.path, root) + (f":{self.line}" if self.line else "")
        shown = self.diff[:DIFF_LINES]
        if len(self.diff) > DIFF_LINES:
            shown.append(f"... ({len(self.diff) - DIFF_LINES} more diff lines)")
        return "\n".join([f"{where}: {self.message}"] + ["    " + line for line in shown])


def python_files(root):
    """The .py files under `root` that may hold markers: not in tests/, not the shipped checkpoints (checked as whole
    files), not hidden or build folders."""
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(
            name for name in subfolders
            if not name.startswith(".") and name not in SKIPPED_FOLDERS and not name.endswith(".egg-info")
        )
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def read_lines(path):
    with open(path, encoding="utf-8") as file:
        return file.read().splitlines(keepends=True)


def parse_replacements(rest):
    """The `with Old->New, ...` part of a marker as (old, new) pairs; None if it cannot be read."""
    rest = rest.strip()
    if not rest:
        return []
    if not rest.startswith("with "):
        return None
    pairs = []
    for item in rest[len("with "):].split(","):
        match = REPLACEMENT.match(item.strip())
        if match is None:
            return None
        old, new = match["old"], match["new"]
        pairs.append((old, new))
        if match["option"]:
            pairs += [(old.lower(), new.lower()), (old.upper(), new.upper())]
    return pairs


def definitions(tree):
    """Every function and class in a parsed module, nested ones included."""
    return [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def first_line(node):
    """1-based line where a definition begins: its first decorator, else its `def`/`class` line."""
    return min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])


def indentation(line):
    return line[: len(line) - len(line.lstrip(" \t"))]


def block_end(lines, node):
    """0-based index after the last line of `node`'s block: through its last statement, then any following line
    indented deeper than its `def`/`class` line (a trailing comment of the body); blank lines at the end are not
    part of it."""
    indent = len(indentation(lines[node.lineno - 1]))
    end = node.end_lineno
    scan = end
    while scan < len(lines):
        line = lines[scan]
        if line.strip() and len(indentation(line)) <= indent:
            break
        scan += 1
        if line.strip():
            end = scan
    return end


def parse(path, cache):
    """`path`'s lines and syntax tree, parsed once per check."""
    if path not in cache:
        lines = read_lines(path)
        cache[path] = lines, ast.parse("".join(lines), filename=path)
    return cache[path]


def find_source(root, target, cache):
    """(file, node) of the function or class that a marker's dotted path names, or (None, reason)."""
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        path = os.path.join(root, *parts[:split]) + ".py"
        if os.path.isfile(path):
            break
    else:
        return None, f"no module file for lengthgen.{target} under {os.path.basename(os.path.abspath(root))}/"
    try:
        tree = parse(path, cache)[1]
    except SyntaxError as error:
        return None, f"cannot parse {os.path.relpath(path, root)}: {error.msg} (line {error.lineno})"
    body, node = tree.body, None
    for name in parts[split:]:
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == name]
        if not found:
            return None, f"{os.path.relpath(path, root)} has no function or class {'.'.join(parts[split:])}"
        node = found[-1]  # the one the name is bound to
        body = node.body
    return path, node


def reindent(lines, old, new):
    """`lines` with the leading `old` indentation replaced by `new` (blank lines left empty)."""
    result = []
    for line in lines:
        if not line.strip():
            result.append("\n")
        elif line.startswith(old):
            result.append(new + line[len(old):])
        else:  # less indented than the block's first line: a continued string, kept as it is
            result.append(line)
    return result


def find_markers(lines):
    """(0-based line, match) of every marker: a comment alone on its line (text in a string is not one)."""
    comments = tokenize.generate_tokens(iter(lines).__next__)
    markers = []
    for token in comments:
        if token.type == tokenize.COMMENT and not token.line[: token.start[1]].strip():
            match = MARKER.match(token.line.rstrip("\r\n"))
            if match:
                markers.append((token.start[0] - 1, match))
    return markers


def check_file(path, root, cache):
    """The problems of the markers in one file, and how many markers it has."""
    lines = read_lines(path)
    if not any(MARKER.match(line) for line in lines):
        return [], 0
    where = os.path.relpath(path, root)
    try:
        tree = parse(path, cache)[1]
        markers = find_markers(lines)
    except (SyntaxError, tokenize.TokenError) as error:
        return [Problem(path, getattr(error, "lineno", None), f"cannot parse the file to check its copies: {error}")], 0
    nodes = definitions(tree)
    by_start = {first_line(node): node for node in nodes}
    by_start.update({node.lineno: node for node in nodes})
    problems = []
    for index, match in markers:
        target, line_number = match["target"], index + 1
        named = f"lengthgen.{target}"
        replacements = parse_replacements(match["rest"])
        if replacements is None:
            problems.append(Problem(path, line_number, f"cannot read the marker's ending {match['rest'].strip()!r} "
                                                       "(expected `with Old->New, Other->Name [all-casing]`)"))
            continue
        copy = by_start.get(line_number + 1)
        if copy is None:
            problems.append(Problem(path, line_number, f"the marker for {named} is not on the line above a def or "
                                                       "class (or its decorators)"))
            continue
        source_path, source = find_source(root, target, cache)
        if source_path is None:
            problems.append(Problem(path, line_number, f"{named} does not exist: {source}"))
            continue
        if os.path.samefile(source_path, path) and first_line(source) == first_line(copy):
            problems.append(Problem(path, line_number, f"the marker for {named} sits on the source itself"))
            continue

        source_lines = parse(source_path, cache)[0]
        with_decorators = line_number + 1 == first_line(copy) and bool(copy.decorator_list)
        source_start = first_line(source) if with_decorators else source.lineno
        expected = source_lines[source_start - 1: block_end(source_lines, source)]
        expected = reindent(expected, indentation(expected[0]), indentation(lines[line_number]))
        expected = "".join(expected)
        for old, new in replacements:
            expected = expected.replace(old, new)
        expected = expected.splitlines(keepends=True)
        start, end = line_number, block_end(lines, copy)
        actual = ["\n" if not line.strip() else line for line in lines[start:end]]
        if actual == expected:
            continue
        diff = difflib.unified_diff(
            [line.rstrip("\n") for line in expected], [line.rstrip("\n") for line in actual],
            fromfile=f"{named} (source, {os.path.relpath(source_path, root)}:{source_start})",
            tofile=f"{where}:{start + 1} (copy)", lineterm="", n=1,
        )
        problems.append(Problem(path, line_number, f"the copy of {named} differs from its source", diff,
                                fix=(start, end, expected)))
    return problems, len(markers)


def check_checkpoints(root):
    """The problems of the model code shipped in checkpoints/*/ (each file must equal the library's file of that
    name), and how many files were compared."""
    checkpoints = os.path.join(root, "checkpoints")
    if not os.path.isdir(checkpoints):
        return [], 0
    library = {}
    for path in python_files(os.path.join(root, "modeling")):
        library.setdefault(os.path.basename(path), []).append(path)
    problems, count = [], 0
    for folder in sorted(os.listdir(checkpoints)):
        if not os.path.isdir(os.path.join(checkpoints, folder)):
            continue
        for name in sorted(os.listdir(os.path.join(checkpoints, folder))):
            shipped = os.path.join(checkpoints, folder, name)
            if not name.endswith(".py") or not os.path.isfile(shipped):
                continue
            count += 1
            sources = library.get(name, [])
            if len(sources) != 1:
                found = ", ".join(os.path.relpath(p, root) for p in sources) or "none"
                problems.append(Problem(shipped, None, f"needs exactly one library file named {name} under "
                                                       f"modeling/ (found: {found})"))
                continue
            wanted, actual = read_lines(sources[0]), read_lines(shipped)
            if wanted == actual:
                continue
            diff = difflib.unified_diff(
                [line.rstrip("\n") for line in wanted], [line.rstrip("\n") for line in actual],
                fromfile=os.path.relpath(sources[0], root), tofile=os.path.relpath(shipped, root), lineterm="", n=1,
            )
            problems.append(Problem(shipped, None, f"differs from the library's {os.path.relpath(sources[0], root)}",
                                    diff, fix=sources[0]))
    return problems, count


def check(root):
    """Every problem under `root`, the number of marked copies and the number of shipped checkpoint files."""
    problems, copies, cache = [], 0, {}
    for path in python_files(root):
        found, count = check_file(path, root, cache)
        problems += found
        copies += count
    found, shipped = check_checkpoints(root)
    return problems + found, copies, shipped


def apply_fixes(problems):
    """Rewrite every fixable problem: the copies, from the bottom of each file up (line numbers stay valid), then the
    shipped checkpoint files from the library files just rewritten."""
    copies = {}
    for problem in problems:
        if isinstance(problem.fix, tuple):
            copies.setdefault(problem.path, []).append(problem.fix)
    for path, fixes in copies.items():
        lines = read_lines(path)
        done_from = len(lines) + 1
        for start, end, expected in sorted(fixes, reverse=True):
            if end > done_from:  # inside a block already rewritten: the next pass checks it again
                continue
            lines[start:end] = expected
            done_from = start
        with open(path, "w", encoding="utf-8") as file:
            file.write("".join(lines))
    for problem in problems:
        if isinstance(problem.fix, str):
            shutil.copyfile(problem.fix, problem.path)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Check (or, with --fix, rewrite) the code copied between the model "
                                                 "folders and the model code shipped in checkpoints/.")
    default_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--root", default=default_root, help="the repository's root (default: %(default)s)")
    parser.add_argument("--fix", action="store_true", help="rewrite every drifted copy from its source")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(os.path.join(root, "modeling")):
        print(f"--root {args.root}: no modeling/ folder there; pass the repository's root", file=sys.stderr)
        return 2

    problems, copies, shipped = check(root)
    if args.fix:
        for _ in range(5):  # a copy of a copy settles once its own source has been rewritten
            fixable = [p for p in problems if p.fix is not None]
            if not fixable:
                break
            for problem in fixable:
                where = os.path.relpath(problem.path, root) + (f":{problem.line}" if problem.line else "")
                print(f"{where}: rewritten ({problem.message})")
            apply_fixes(fixable)
            problems, copies, shipped = check(root)
    for problem in problems:
        print(problem.report(root))
    if problems:
        fixable = sum(problem.fix is not None for problem in problems)
        advice = []
        if fixable:
            advice.append(f"`python utils/check_copies.py --fix` rewrites the {fixable} drifted one(s)")
        if fixable < len(problems):
            advice.append(f"{len(problems) - fixable} need(s) an edit by hand")
        print(f"{len(problems)} problem(s): {'; '.join(advice)}.", file=sys.stderr)
        return 1
    print(f"{copies} marked copies and {shipped} files shipped in checkpoints/ match their sources.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
