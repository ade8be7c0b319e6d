#!/usr/bin/env bash
# One piece of the paper-scale presets on a GPU machine that runs a single command of at most about ten minutes on a
# copy of this checkout and brings back at most 8 files of at most 16 MiB (64 MiB in all) from the folder $OUT: a
# batch job with a size-limited artifact store, say. The machine may start bare (torch and transformers, no `datasets`),
# so the wheels of the missing dependencies travel with the checkout; what the presets leave (packed checkpoints,
# results JSONs, plots) comes back as one tar archive cut into parts of 16 MiB, gpu_piece.tar.partNN.
#
#   here, once:   bash benchmarks/gpu_piece.sh --wheels
#                 (writes .whl/, git-ignored: the wheels of the dependencies the GPU image lacks)
#   here, before: bash benchmarks/gpu_piece.sh --travel PRESET...
#                 (the working tree that travels must stay under 64 MiB, and checkpoints/ with every kept piece and
#                 the board's cells is more: this takes checkpoints/, the other presets' pieces and, unless the
#                 presets name `board`, the board's cells out of git's index, the files untouched, and ignores them in
#                 .git/info/exclude until --collect or --restore puts them back)
#   there:        with .whl/ carried along, the command
#                 bash benchmarks/gpu_piece.sh 420 ndr-ctl-forward-paper ndr-ctl-backward-paper-code
#                 (one to four presets train side by side on the one GPU for 420 s each, resuming from
#                 docs/results/pieces/NAME/ where a piece is there; each one's packed checkpoint, results JSON and plot
#                 go into the archive, in the order given while it stays within 64 MiB: a thesis-size CTL piece is
#                 8-11 MiB, the thesis ListOps one 31 MiB; a preset left out is named, and the command fails)
#   here, after:  bash benchmarks/gpu_piece.sh --collect FOLDER
#                 (FOLDER holds what came back: the archive's pieces replace docs/results/pieces/NAME/'s, the JSONs and
#                 plots go to docs/results/, and what --travel took out of git's index goes back; --restore does only
#                 the last)
#
# The name `board` in place of a preset runs the Chomsky-protocol leaderboard (docs/leaderboard/chomsky) for the
# SECONDS, $BOARD_WORKERS cells at a time on the one GPU (default 12); the cells it finished come back and --collect
# puts them in docs/leaderboard/chomsky/cells/ (then `lengthgen leaderboard --leaderboard_only --output_dir
# docs/leaderboard/chomsky` rewrites its tables):  --travel board, then  bash benchmarks/gpu_piece.sh 540 board
#
# The name `checks`, alone (its timings need the GPU to themselves), runs the GPU checks one after the other, each by
# the deadline of its share of the SECONDS (time a step leaves goes to the next): the Triton kernels of geometric
# attention compiled (tests/triton_interpreter_checks.py), their time and memory against SDPA at N = 16 to 8,192 in
# bf16 (benchmarks/ndr_attention.py), the forward pass alone at N = 1,024 to 8,192 (`--forward_only`: what the
# backward costs is the difference), one step profiled kernel by kernel at N = 256 to 4,096 (`--profile`), the two
# kernels under Nsight Compute at N = 4,096 (throughput, occupancy, where warps stall), other launch configurations
# (rows per program x warps, `--triton_configs`) at N = 1,024 and 4,096, the NDR's training and evaluation steps
# with the kernels against softmax attention (`--end_to_end`), fine-tuning under FSDP through accelerate
# (the GPU test of tests/test_run_clm_recurrent.py) and recurrent generation against the plain model's
# (benchmarks/recurrence_generation.py, bf16, windows of 128 and 512: on an H200 machine whose plain model generated
# 18 tokens/s, window 2,048, 4,032 new tokens a way, needs a piece of its own: `--windows 2048`). A log of each and
# the six JSONs come back; --collect puts the JSONs in docs/ and prints the logs: --travel checks, then bash
# benchmarks/gpu_piece.sh 540 checks
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {  # a command-line mistake: one line, exit status 2
    echo "gpu_piece.sh: $1 (usage: gpu_piece.sh SECONDS PRESET... | --wheels | --travel PRESET..." \
        "| --collect FOLDER | --restore)" >&2
    exit 2
}

max_presets=4  # side by side on the one GPU; their pieces come back in at most 64 MiB
board=docs/leaderboard/chomsky  # `board`: the Chomsky-protocol leaderboard, its cells resumed and brought back
bundle=gpu_piece.tar.part  # the one archive that comes back, in parts: gpu_piece.tar.part00, ...
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
    (( $# >= 1 && $# <= max_presets )) ||
        usage "--travel takes the GPU command's one to $max_presets presets, not $#"
    [[ -d .git ]] || usage "--travel works in the git checkout that travels to the GPU machine"
    ! grep -qxF "$travel_begin" "$exclude" 2> /dev/null || usage "a --travel is in place already: --restore first"
    hide=()
    [[ -d checkpoints ]] && hide+=(checkpoints)
    [[ -d "$board/cells" && " $* " != *" board "* ]] && hide+=("$board")  # the board's cells travel for `board` only
    for folder in docs/results/pieces/*/; do
        [[ -d "$folder" ]] || continue
        name=$(basename "$folder")
        [[ " $* " == *" $name "* ]] || hide+=("docs/results/pieces/$name")
    done
    (( ${#hide[@]} == 0 )) || git rm -r -q --cached --ignore-unmatch -- "${hide[@]}"
    mkdir -p "$(dirname "$exclude")"
    { echo "$travel_begin"; printf '/%s/\n' "${hide[@]}"; echo "$travel_end"; } >> "$exclude"
    bytes=$( { git ls-files -z; git ls-files -z --others --exclude-standard; } | xargs -0 cat 2> /dev/null | wc -c)
    echo "travels: $(( (bytes + 1048575) / 1048576 )) MiB of the 64 that may travel (carried paths such as .whl/ come on" \
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
    for name in datasets dill multiprocess evaluate accelerate psutil pytest pluggy iniconfig pygments; do
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
    [[ -d "$files_at" ]] || usage "--collect needs the folder the GPU machine's files were copied to"
    back=$(mktemp -d)
    trap 'rm -rf "$back"' EXIT
    parts=("$files_at"/$bundle*)
    [[ -e "${parts[0]}" ]] && cat "${parts[@]}" | tar -xf - -C "$back"  # nothing came back: no parts
    for folder in "$back"/*/; do
        [[ -d "$folder" ]] || continue
        name=$(basename "$folder")
        if [[ "$name" == board ]]; then  # the leaderboard's finished cells
            mkdir -p "$board/cells"
            cp "$folder"/cells/*.json "$board/cells/" 2>/dev/null || true
            echo "board: $(ls "$folder/cells" | wc -l) cells"
            continue
        fi
        if [[ "$name" == checks ]]; then  # the GPU checks: their JSONs, and what each printed
            cp "$folder"/*.json docs/ 2>/dev/null || true
            for log in "$folder"/*.log; do
                echo "== $(basename "$log")"
                lines=40
                [[ "$(basename "$log")" == ncu.log ]] && lines=400  # Nsight Compute's sections for both kernels
                tail -n "$lines" "$log"
            done
            continue
        fi
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
(( $# >= 1 && $# <= max_presets )) || usage "one to $max_presets presets side by side, not $#"
[[ " $* " != *" checks "* ]] || (( $# == 1 )) || usage "checks runs alone: its timings need the GPU to themselves"
[[ -n "${OUT:-}" ]] || usage "\$OUT (the GPU machine's folder of files to bring back) is not set"
out=$OUT
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 PYTHONUNBUFFERED=1
if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e .
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

run_checks() {  # `checks` into folder $2, one after the other; a step ends by its share's deadline (percent of $1
    # seconds, counted from the start, so what one step leaves unused goes to the next)
    local seconds=$1 into=$2 step share name command code failed=0 done_share=0 limit
    mkdir -p "$into"
    local steps=(
        "26 triton python3 tests/triton_interpreter_checks.py"
        "13 ndr_attention python3 benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 16 64 256 1024
            4096 8192 --repeats 20 --warmup 3 --pytorch_max 4096 --threads 1
            --json $into/ndr_attention_gpu_bf16_linear.json"
        "5 ndr_forward python3 benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 1024 4096 8192
            --forward_only --repeats 10 --warmup 2 --pytorch_max 1024 --threads 1
            --json $into/ndr_attention_gpu_bf16_forward.json"
        "6 ndr_profile python3 benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 256 1024 4096
            --repeats 3 --warmup 1 --pytorch_max 256 --threads 1 --profile
            --json $into/ndr_attention_gpu_bf16_profile.json"
        "6 ncu ncu --kernel-name regex:_(forward|backward)_kernel --launch-count 2 --section SpeedOfLight
            --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis
            python3 benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 4096 --repeats 1 --warmup 0
            --pytorch_max 0 --threads 1"
        "6 triton_launch python3 benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 1024 4096
            --repeats 10 --warmup 2 --threads 1 --triton_configs 16x2 16x8 32x4 32x8
            --json $into/ndr_attention_gpu_bf16_launch.json"
        "6 ndr_end_to_end python3 benchmarks/ndr_attention.py --end_to_end --device cuda --dtype bfloat16
            --train_batch_size 512 --eval_batch_size 64 --end_to_end_repeats 3 --pytorch_max 0 --threads 1
            --json $into/ndr_end_to_end_gpu_bf16.json"
        "11 fsdp python3 -m pytest -q -p no:cacheprovider tests/test_run_clm_recurrent.py -k fsdp_launch_on_gpus"
        "21 generation python3 benchmarks/recurrence_generation.py --device cuda --dtype bfloat16 --windows 128 512
            --json $into/recurrence_generation_gpu.json"
    )
    local start=$SECONDS
    for step in "${steps[@]}"; do
        read -r share name command <<< "$(echo $step)"
        done_share=$(( done_share + share ))
        limit=$(( start + seconds * done_share / 100 - SECONDS ))
        code=0
        timeout --kill-after=10 $(( limit > 0 ? limit : 1 )) $command > "$into/$name.log" 2>&1 || code=$?
        echo "$name: exit status $code$( (( code == 124 )) && echo ' (out of time)') after $(( SECONDS - start )) s" \
            >> "$into/checks.log"
        (( code == 0 )) || failed=1
    done
    return $failed
}

work=$(mktemp -d)  # work/NAME/: what each preset leaves, bundled into $OUT at the end
pids=()
started=$(mktemp)  # cells written after this are the board's new ones
for name in "$@"; do
    if [[ "$name" == checks ]]; then
        run_checks "$seconds" "$work/checks" > /tmp/checks.out 2>&1 &
        pids+=($!)
        continue
    fi
    if [[ "$name" == board ]]; then
        # a hard stop (timeout kills the workers too): a cell is written whole or not at all
        timeout --kill-after=10 "$seconds" python3 -m lengthgen.commands.main leaderboard --protocol chomsky \
            --output_dir "$board" --workers "${BOARD_WORKERS:-12}" --threads 1 > "/tmp/$name.out" 2>&1 &
        pids+=($!)
        continue
    fi
    resume=()
    [[ -d docs/results/pieces/$name ]] && resume=(--unpack_from "docs/results/pieces/$name")
    python3 -m lengthgen.commands.main reproduce "$name" --max_train_seconds "$seconds" ${resume[@]+"${resume[@]}"} \
        --pack_to "$work/$name" > "/tmp/$name.out" 2>&1 &
    pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
    code=0
    wait "$pid" || code=$?
    (( code == 124 )) || (( code == 0 )) || status=$code  # 124: the board stopped at its time, as asked
done
kept=() total=0
for name in "$@"; do
    mkdir -p "$work/$name"
    if [[ "$name" == board ]]; then
        mkdir -p "$work/board/cells"
        find "$board/cells" -name '*.json' -newer "$started" -exec cp {} "$work/board/cells/" \; 2>/dev/null || true
    fi
    cp docs/results/"$name".json docs/results/"$name".png "$work/$name/" 2>/dev/null || true
    echo "== $name"
    if [[ "$name" == checks ]]; then
        for log in "$work"/checks/*.log; do
            echo "-- $(basename "$log")"
            tail -n 20 "$log"
        done
    else
        tail -c 2000 "/tmp/$name.out" | tr '\r' '\n' | tail -n 25
    fi
    size=$(du -sb "$work/$name" | cut -f1)
    if (( total + size + 1048576 > 64 * 1048576 )); then  # 1 MiB for the archive's headers
        echo "gpu_piece.sh: $name left out: its $(( size >> 20 )) MiB would take what comes back past 64 MiB" >&2
        status=1
        continue
    fi
    kept+=("$name")
    total=$(( total + size ))
done
(( ${#kept[@]} == 0 )) || tar -cf - -C "$work" "${kept[@]}" | split -b 16M -d -a 2 - "$out/$bundle"
ls -l "$out"
exit $status
