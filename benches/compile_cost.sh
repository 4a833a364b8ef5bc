#!/usr/bin/env bash
# Compile cost of a generated model as a function of its depth.
#
#   benches/compile_cost.sh            (from anywhere; needs cargo, takes a few minutes)
#
# For N in 16 64 256, generates in a temporary directory a user crate `cc_n<N>` (a path
# dependency on this repository's `fusegraph`, default features) whose main trains one step
# of `#[fusegraph::model(loss = Mse)] struct Net` made of N layers `Dense<32, 32, Relu>` (the
# last without activation), with Keras Adam at batch 8. The crates share one
# CARGO_TARGET_DIR; a warm-up release build of all of them (dependencies included) is not
# counted. Then, for each N, wall-clock seconds of:
#   cold     `cargo clean -p cc_n<N> --release` then `cargo build --release -p cc_n<N>`: the
#            user crate alone (macro expansion, type checking, codegen, link);
#   rebuild  after editing the middle layer's width in the source (`Dense<32, 32, Relu>` ->
#            `Dense<32, 48, Relu>`, the next layer `Dense<48, 32, ..>`).
# Each is the best of REPEAT runs (default 3; set REPEAT in the environment). Stable rustc
# has no `-Z time-passes`, so only wall time is measured. The target directory is temporary
# unless COMPILE_COST_TARGET_DIR names one to keep, so that a second run skips the warm-up's
# dependency builds.
#
# Rule: growth must be at most linear: the script exits 1 if, for the cold build or for the
# rebuild, time(256) / time(16) > 4 (16 times the layers in at most 4 times the time: linear
# growth over a fixed cost), or time(256) > LIMIT_SECONDS (default 6 s, the 2-core machines
# CI runs on). A model's `forward` and `backward` call each layer out of line
# (`Layer::forward_out_of_line`), so they grow by a few lines of code per layer; when every
# layer was inlined into them, N = 256 took 13.5 s and N = 512 36 s.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repeat="${REPEAT:-3}"
sizes=(16 64 256)
limit_seconds="${LIMIT_SECONDS:-6}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR="${COMPILE_COST_TARGET_DIR:-$work/target}"

# The source of the user crate with `n` layers; the middle layer is `width` wide.
source_of() {
    local n=$1 width=$2 mid=$(($1 / 2)) i in out act
    echo 'use fusegraph::optim::keras::Adam;'
    echo 'use fusegraph::prelude::*;'
    echo
    echo '/// A stack of dense layers.'
    echo '#[fusegraph::model(loss = Mse)]'
    echo 'struct Net {'
    for ((i = 0; i < n; i++)); do
        in=32 out=32 act=", Relu"
        ((i == mid)) && out=$width
        ((i == mid + 1)) && in=$width
        ((i == n - 1)) && act=""
        echo "    l$i: Dense<$in, $out$act>,"
    done
    echo '}'
    echo
    echo 'fn main() {'
    echo '    let mut model = Net::init(Seed(1));'
    echo '    let mut step = TrainStep::<Net, Adam, 8>::new(&model, Adam::default());'
    echo '    let x: Vec<f32> = (0..8 * 32).map(|i| (i % 7) as f32 / 7.0).collect();'
    echo '    let y = vec![0.25f32; 8 * 32];'
    echo '    println!("loss {}", step.run(&mut model, &x, &y));'
    echo '}'
}

members=""
for n in "${sizes[@]}"; do
    mkdir -p "$work/cc_n$n/src"
    cat >"$work/cc_n$n/Cargo.toml" <<EOF
[package]
name = "cc_n$n"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
fusegraph = { path = "$repo" }
EOF
    source_of "$n" 32 >"$work/cc_n$n/src/main.rs"
    members="$members\"cc_n$n\", "
done
cat >"$work/Cargo.toml" <<EOF
[workspace]
members = [$members]
resolver = "2"
EOF
# The repository's lock file: the same dependency versions, no registry lookup.
cp "$repo/Cargo.lock" "$work/Cargo.lock"

cd "$work"
echo "compile_cost: warm-up build of the dependencies (not counted)..." >&2
cargo build --release --workspace --quiet
for n in "${sizes[@]}"; do
    "$CARGO_TARGET_DIR/release/cc_n$n" >/dev/null
done

# Seconds of the command, to the millisecond.
seconds() {
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    calc "($t1 - $t0) / 1e9"
}

# The value of an arithmetic expression (awk's syntax), or of a comparison (1 or 0): in
# parentheses, since awk reads `print a > b` as a redirection to the file `b`.
calc() {
    awk "BEGIN { print ($1) }"
}

declare -A cold rebuild
for n in "${sizes[@]}"; do
    cold[$n]=1e9 rebuild[$n]=1e9
done
# The runs go round the sizes (16, 64, 256, 16, ...), so that a slow spell of a shared machine
# does not fall on every run of one size.
for ((r = 0; r < repeat; r++)); do
    for n in "${sizes[@]}"; do
        source_of "$n" 32 >"cc_n$n/src/main.rs"
        cargo clean -p "cc_n$n" --release --quiet
        t=$(seconds cargo build --release -p "cc_n$n")
        cold[$n]=$(calc "$t < ${cold[$n]} ? $t : ${cold[$n]}")
        source_of "$n" 48 >"cc_n$n/src/main.rs"
        t=$(seconds cargo build --release -p "cc_n$n")
        rebuild[$n]=$(calc "$t < ${rebuild[$n]} ? $t : ${rebuild[$n]}")
    done
done
for n in "${sizes[@]}"; do
    "$CARGO_TARGET_DIR/release/cc_n$n" >/dev/null
done

echo "compile cost of #[fusegraph::model] with N Dense<32, 32> layers (release, best of $repeat)"
printf '  %4s %10s %12s %12s %14s\n' N "cold s" "cold s/layer" "rebuild s" "rebuild s/layer"
for n in "${sizes[@]}"; do
    printf '  %4d %10.2f %12.3f %12.2f %14.3f\n' "$n" "${cold[$n]}" \
        "$(calc "${cold[$n]} / $n")" "${rebuild[$n]}" "$(calc "${rebuild[$n]} / $n")"
done
status=0
for kind in cold rebuild; do
    declare -n t=$kind
    ratio=$(calc "${t[256]} / ${t[16]}")
    slope=$(calc "(${t[256]} - ${t[16]}) / 240")
    verdict="ok"
    if [ "$(calc "$ratio > 4")" = 1 ]; then
        verdict="superlinear: FAIL"
        status=1
    fi
    if [ "$(calc "${t[256]} > $limit_seconds")" = 1 ]; then
        verdict="over ${limit_seconds} s at N = 256: FAIL"
        status=1
    fi
    printf '  %-7s time(256)/time(16) = %5.2f (limit 4.00), time(256) = %.2f s (limit %s), %.3f s per added layer: %s\n' \
        "$kind" "$ratio" "${t[256]}" "$limit_seconds" "$slope" "$verdict"
    unset -n t
done
exit $status
