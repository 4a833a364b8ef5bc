#!/usr/bin/env bash
# The data-parallel example under `mpirun`, given mistakes on one process: every job must end
# within its timeout, with a failing status and the message that names the mistake. Called by
# `.ci/run` with the example's binary (built with `--features mpi`) and the digits CSV.
#
#   tests/mpi/faults.sh target/release/examples/data_parallel data/digits.csv
set -euo pipefail
bin="$1"
csv="$2"
mpirun="mpirun --allow-run-as-root --oversubscribe"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# expect NAME MESSAGE MPIRUN-ARGUMENTS...: the job ends, with an error, and prints MESSAGE.
expect() {
    local name="$1" message="$2"
    shift 2
    local status=0 start=$SECONDS
    timeout 120 $mpirun "$@" >"$tmp/out" 2>"$tmp/err" || status=$?
    if [ "$status" -eq 124 ]; then
        echo "$name: the job hung (stopped after 120 s)" >&2
        exit 1
    fi
    if [ "$status" -eq 0 ]; then
        echo "$name: the job ended with status 0" >&2
        exit 1
    fi
    if ! grep -qF -- "$message" "$tmp/err"; then
        echo "$name: the job's errors do not say \"$message\":" >&2
        cat "$tmp/err" >&2
        exit 1
    fi
    echo "$name: ended in $((SECONDS - start)) s with status $status: $(grep -F -- "$message" "$tmp/err" | head -1)"
}

# A shorter copy, and a copy with one label changed (row 5's, from d to d + 1 mod 10).
head -n 1698 "$csv" >"$tmp/short.csv"
awk -F, 'BEGIN { OFS = "," } NR == 6 { $1 = ($1 + 1) % 10 } { print }' "$csv" >"$tmp/relabelled.csv"

expect "rank 1's data file is missing" "rank 1: $tmp/missing.csv: No such file" \
    -np 1 "$bin" --epochs 1 : -np 1 "$bin" --epochs 1 --data "$tmp/missing.csv"
expect "rank 1's data set is shorter" \
    "the training data's samples: rank 1 has 1697, rank 0 has 1797" \
    -np 1 "$bin" --epochs 1 : -np 1 "$bin" --epochs 1 --data "$tmp/short.csv"
expect "rank 3 has one label changed" \
    "the training data (its samples, targets and lengths): rank 3 has" \
    -np 3 "$bin" --epochs 1 : -np 1 "$bin" --epochs 1 --data "$tmp/relabelled.csv"
expect "rank 1 shuffles with another seed" "the fit's seed: rank 1 has 2, rank 0 has 1" \
    -np 1 "$bin" --epochs 1 : -np 1 "$bin" --epochs 1 --seed 2
expect "rank 1 fails during the fit" "rank 1: rank 1 fails on purpose" \
    -np 2 "$bin" --fail-rank 1
expect "rank 1 panics during the fit" "rank 1 panics on purpose" \
    -np 2 "$bin" --panic-rank 1
touch "$tmp/a-file"
expect "rank 0 cannot write its checkpoint after the fit" "rank 0: " \
    -np 2 "$bin" --epochs 1 --save "$tmp/a-file/state.safetensors"

# A process killed from outside (SIGKILL): mpirun ends the others.
start=$SECONDS
timeout 120 $mpirun -np 2 "$bin" --epochs 1000 >/dev/null 2>"$tmp/err" &
job=$!
# The job's processes, found by their command line in /proc (no procps needed).
ranks_of_job() {
    local proc
    for proc in /proc/[0-9]*; do
        [ "$(tr '\0' ' ' <"$proc/cmdline" 2>/dev/null)" = "$bin --epochs 1000 " ] && echo "${proc#/proc/}"
    done
    return 0
}
victim=""
for _ in $(seq 100); do
    victim="$(ranks_of_job | tail -n 1)"
    [ -n "$victim" ] && break
    sleep 0.1
done
[ -n "$victim" ] || { echo "no process of the job to kill" >&2; exit 1; }
sleep 1
kill -9 "$victim"
status=0
wait "$job" || status=$?
if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    echo "a job with a killed process ended with status $status (0: no error, 124: it hung)" >&2
    exit 1
fi
echo "a process killed with SIGKILL: the job ended in $((SECONDS - start)) s with status $status"
