#!/usr/bin/env bash
# One piece of the paper-scale presets on a lent GPU machine, prepared so that a session's few minutes of device time
# go to training. The machine starts bare (no `datasets`; docs: the device README), runs one command of at most ten
# minutes, and returns at most 8 files of at most 16 MiB from $OUT.
#
#   here, once:   bash benchmarks/gpu_piece.sh --wheels
#                 (writes .whl/, git-ignored: the wheels of the dependencies the GPU image lacks)
#   here, before: bash benchmarks/gpu_piece.sh --travel PRESET [PRESET]
#                 (the working tree that travels to the device must stay under 64 MiB, and checkpoints/ with every
#                 kept piece is more: this takes checkpoints/ and the other presets' pieces out of git's index, the
#                 files untouched, and ignores them in .git/info/exclude until --collect or --restore puts them back)
#   there:        the device's run with carry [".whl"], timeout_s 560 and the command
#                 bash benchmarks/gpu_piece.sh 420 ndr-ctl-backward-paper ndr-ctl-backward-paper-8steps
#                 (the presets train side by side on the one GPU for 420 s each, resuming from
#                 docs/results/pieces/NAME/ where a piece is there; each leaves $OUT/NAME/ with its packed checkpoint,
#                 its results JSON and plot: at most two presets, for the 8 files that come back)
#   here, after:  bash benchmarks/gpu_piece.sh --collect FILES_AT
#                 (the parts replace docs/results/pieces/NAME/'s, the JSON and plot go to docs/results/, and what
#                 --travel took out of git's index goes back; --restore does only the last)
#   and again:    with device time left, collect and issue the next command at once, with fewer SECONDS: the machine
#                 goes back after 30 idle seconds, and a fresh start costs minutes
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {  # a command-line mistake: one line, exit status 2
    echo "gpu_piece.sh: $1 (usage: gpu_piece.sh SECONDS PRESET [PRESET] | --wheels | --travel PRESET [PRESET]" \
        "| --collect FILES_AT | --restore)" >&2
    exit 2
}

exclude=.git/info/exclude
travel_begin="# gpu_piece.sh --travel: out of git's index until --collect or --restore"
travel_end="# gpu_piece.sh --travel: end"

restore_index() {  # undo --travel: its paths back into git's index (as HEAD has them), its lines out of $exclude
    [[ -f "$exclude" ]] && grep -qxF "$travel_begin" "$exclude" || return 0
    local hidden
    mapfile -t hidden < <(sed -n "\\|^$travel_begin\$|,\\|^$travel_end\$|p" "$exclude" | sed -n 's|^/\(.*\)/$|\1|p')
    (( ${#hidden[@]} == 0 )) || git reset -q -- "${hidden[@]}"
    sed -i "\\|^$travel_begin\$|,\\|^$travel_end\$|d" "$exclude"
    echo "back in git's index: ${hidden[*]:-nothing}"
}

if [[ "${1:-}" == "--travel" ]]; then
    shift
    (( $# >= 1 && $# <= 2 )) || usage "--travel takes the device command's one or two presets, not $#"
    [[ -d .git ]] || usage "--travel works in the git checkout that travels to the device"
    ! grep -qxF "$travel_begin" "$exclude" 2> /dev/null || usage "a --travel is in place already: --restore first"
    hide=()
    [[ -d checkpoints ]] && hide+=(checkpoints)
    for folder in docs/results/pieces/*/; do
        [[ -d "$folder" ]] || continue
        name=$(basename "$folder")
        [[ " $* " == *" $name "* ]] || hide+=("docs/results/pieces/$name")
    done
    (( ${#hide[@]} == 0 )) || git rm -r -q --cached --ignore-unmatch -- "${hide[@]}"
    mkdir -p "$(dirname "$exclude")"
    { echo "$travel_begin"; printf '/%s/\n' "${hide[@]}"; echo "$travel_end"; } >> "$exclude"
    bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 cat 2> /dev/null | wc -c)
    echo "travels: $(( (bytes + 1048575) / 1048576 )) MiB of the device's 64 (carried paths such as .whl/ come on" \
        "top); out of git's index until --collect or --restore: ${hide[*]:-nothing}"
    exit 0
fi

if [[ "${1:-}" == "--restore" ]]; then
    restore_index
    exit 0
fi

if [[ "${1:-}" == "--wheels" ]]; then
    # versions of this machine's environment; pure-Python wheels (multiprocess: one per Python, the image has 3.12)
    wanted=()
    for name in datasets dill multiprocess evaluate; do
        wanted+=("$name==$(python -c "import importlib.metadata as m; print(m.version('$name'))")")
    done
    rm -rf .whl
    python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl "${wanted[@]}"
    ls .whl
    exit 0
fi

if [[ "${1:-}" == "--collect" ]]; then
    files_at=${2:-}
    [[ -d "$files_at" ]] || usage "--collect needs the folder the device's files were copied to (the reply's files_at)"
    for folder in "$files_at"/*/; do
        [[ -d "$folder" ]] || continue  # nothing came back
        name=$(basename "$folder")
        if ls "$folder"/checkpoint-*.tar.part* > /dev/null 2>&1; then
            rm -f docs/results/pieces/"$name"/checkpoint-*.tar.part*
            mkdir -p docs/results/pieces/"$name"
            cp "$folder"/checkpoint-*.tar.part* docs/results/pieces/"$name"/
        fi
        cp "$folder"/"$name".json "$folder"/"$name".png docs/results/ 2>/dev/null || true
        echo "$name: $(ls "$folder" | tr '\n' ' ')"
    done
    restore_index
    exit 0
fi

seconds=${1:-}
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || usage "SECONDS must be a positive whole number, not '$seconds'"
shift
(( $# >= 1 && $# <= 2 )) || usage "one or two presets (8 files come back from \$OUT), not $#"
[[ -n "${OUT:-}" ]] || usage "\$OUT (the device's folder of files to bring back) is not set"
out=$OUT
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

pids=()
for name in "$@"; do
    resume=()
    [[ -d docs/results/pieces/$name ]] && resume=(--unpack-from "docs/results/pieces/$name")
    python3 benchmarks/reproduce.py "$name" --max-train-seconds "$seconds" ${resume[@]+"${resume[@]}"} --pack-to "$out/$name" \
        > "/tmp/$name.out" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
for name in "$@"; do
    cp docs/results/"$name".json docs/results/"$name".png "$out/$name/" 2>/dev/null || true
    echo "== $name"
    tail -c 2000 "/tmp/$name.out" | tr '\r' '\n' | tail -n 25
done
exit $status
