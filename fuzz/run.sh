#!/usr/bin/env bash
# Fuzzes each target for a bounded time, one after the other; exits non-zero
# if any target crashed (panicked, timed out, ran out of memory).
# `make fuzz` / `make fuzz-long` run it after building the targets.
#
#   fuzz/run.sh [target...]        (default: every target)
#
# Environment (the Makefile sets them):
#   FUZZ_SECONDS  seconds per target (default 60)
#   FUZZ_OUT      generated corpora and logs (default target/fuzz)
#   CARGO_FUZZ    how to call cargo-fuzz (default: cargo +nightly fuzz)
#   FUZZ_FLAGS    build flags, the same as for `cargo fuzz build`
#
# Each target reads its corpus from FUZZ_OUT/corpus/<target> (grown by
# every run), fuzz/corpus/<target> (the committed seeds) and
# fuzz/regressions/<target> (inputs that once crashed: replayed first, so a
# regression fails at once). Crashes are written to fuzz/artifacts/<target>/;
# full logs to FUZZ_OUT/logs/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
out=$(realpath -m "${FUZZ_OUT:-target/fuzz}")
read -r -a cargo_fuzz <<<"${CARGO_FUZZ:-cargo +nightly fuzz}"
read -r -a flags <<<"${FUZZ_FLAGS:---fuzz-dir fuzz --sanitizer none --target-dir $out/build}"

if (($# > 0)); then
    targets=("$@")
else
    mapfile -t targets < <("${cargo_fuzz[@]}" list --fuzz-dir fuzz)
fi

mkdir -p "$out/logs"
failed=()
summary=()
for t in "${targets[@]}"; do
    corpora=("$out/corpus/$t" "$PWD/fuzz/corpus/$t")
    [[ -d fuzz/regressions/$t ]] && corpora+=("$PWD/fuzz/regressions/$t")
    mkdir -p "$out/corpus/$t"
    log=$out/logs/$t.log
    echo "=== fuzz $t: ${seconds}s ($(date -u +%H:%M:%S)); log: $log"
    # The full log goes to the file; the console gets all but the lines
    # for each new or reduced corpus input and the recommended dictionary.
    # The fuzzer's status is what counts (grep's is 1 when it prints
    # nothing).
    set +e
    "${cargo_fuzz[@]}" run "${flags[@]}" "$t" "${corpora[@]}" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        2>&1 | tee "$log" | grep --line-buffered -vE '^#[0-9]+[[:space:]]+(NEW|REDUCE) |^".*" # Uses: [0-9]+$|^###### (Recommended|End of recommended) dictionary'
    status=${PIPESTATUS[0]}
    set -e
    stats=$(awk '
        /^stat::number_of_executed_units:/ { execs = $2 }
        /^stat::average_exec_per_sec:/ { rate = $2 }
        /^#[0-9]+[[:space:]]+(INITED|NEW|REDUCE|pulse|DONE)/ {
            for (i = 1; i < NF; i++) {
                if ($i == "cov:") cov = $(i + 1)
                if ($i == "ft:") ft = $(i + 1)
                if ($i == "corp:") corp = $(i + 1)
            }
        }
        END { printf "execs %s, exec/s %s, cov %s, ft %s, corpus %s", execs, rate, cov, ft, corp }
    ' "$log")
    if ((status != 0)); then
        failed+=("$t")
        summary+=("$t: FAILED (exit $status); $stats; see $log and fuzz/artifacts/$t/")
    else
        summary+=("$t: ok; $stats")
    fi
done

echo
echo "=== fuzz summary (${seconds}s per target)"
printf '  %s\n' "${summary[@]}"
if ((${#failed[@]})); then
    echo "fuzz: crashes in ${failed[*]}; reproduce with: ${cargo_fuzz[*]} run ${flags[*]} <target> fuzz/artifacts/<target>/<file>" >&2
    exit 1
fi
