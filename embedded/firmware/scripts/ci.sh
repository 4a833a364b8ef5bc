#!/usr/bin/env bash
# The firmware as a checked product, run by `.ci/run` on every commit:
# 1. installs what is missing (Debian bookworm: rustc-web, cargo-web and rust-web-src 1.96 for
#    core's sources, lld-16, and qemu-system-arm from bookworm-backports);
# 2. builds the three firmware binaries for the Cortex-M4F (`thumbv7em-none-eabihf`) with core
#    built from source by Debian's rustc, and runs each in QEMU with a timeout: the demo (8-16-4
#    MLP), the digits (64-32-16-10 MLP, held-out accuracy asserted by the exit status) and the
#    fine-tuning (the digits' backbone trained in PyTorch on 0-4, frozen in flash, a ten-class
#    head trained; held-out accuracy after asserted by the exit status);
# 3. checks that each prints the same report line (loss bits) as the host build of the same
#    configuration (the features the firmware enables on fusegraph-embedded-demo, with `std`
#    and the AVX2+FMA kernels, whose GEMM rounds as the firmware's `vfma.f32`);
# 4. prints and checks flash, statics against the train step's compile-time budget, the stack's
#    high-water mark, and the instructions per step and per floating-point operation;
# 5. builds (does not run) the no_std demo library for a Cortex-M0+ (`thumbv6m-none-eabi`: no
#    FPU, no compare-and-swap) and a RISC-V MCU (`riscv32imac-unknown-none-elf`).
# One target directory serves the three targets: FIRMWARE_TARGET_DIR, by default
# embedded/firmware/target (cache it between runs). The host build uses CARGO_TARGET_DIR, by
# default the workspace's target/.
set -euo pipefail
cd "$(dirname "$0")/.."
firmware_dir="$PWD"
root="$(cd ../.. && pwd)"
fw_target="${FIRMWARE_TARGET_DIR:-$firmware_dir/target}"
host_target="${CARGO_TARGET_DIR:-$root/target}"
elf_dir="$fw_target/thumbv7em-none-eabihf/release"

# Limits: the parts each firmware is said to fit (README), in bytes of the release build.
# The demo: a part with 48 KB of flash and 16 KB of RAM.
DEMO_MAX_FLASH=49152
DEMO_MAX_RAM=16384
# The digits: a part with 256 KB of flash and 64 KB of RAM (an STM32F401RC, say).
DIGITS_MAX_FLASH=262144
DIGITS_MAX_RAM=65536
# The fine-tuning: the digits' part, but only 32 KB of its RAM.
FINETUNE_MAX_FLASH=262144
FINETUNE_MAX_RAM=32768
# The statics beside the train step's own bytes (semihosting's handle, the `Static` flags).
MAX_OTHER_STATICS=64
# The stack's high-water mark.
DEMO_MAX_STACK=8192
DIGITS_MAX_STACK=12288
FINETUNE_MAX_STACK=8192
# Instructions per floating-point operation of a train step.
DEMO_MAX_PER_FLOP=3
DIGITS_MAX_PER_FLOP=3
FINETUNE_MAX_PER_FLOP=3
# Seconds a firmware may run in QEMU.
QEMU_TIMEOUT=120

step() { printf '\n==> firmware: %s\n' "$*"; }
fail() { echo "firmware: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

step "tools"
# Debian packages by what they provide; only the missing ones are installed.
missing=()
for pkg in rustc-web cargo-web rust-web-src lld-16 qemu-system-arm; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    [ "$status" = "install ok installed" ] || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 \
        || fail "needs ${missing[*]} (Debian bookworm packages) or their equivalents"
    echo "installing ${missing[*]}"
    if [[ " ${missing[*]} " == *" qemu-system-arm "* ]] \
        && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
        echo "deb http://deb.debian.org/debian bookworm-backports main" \
            | as_root tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
    fi
    as_root apt-get update -qq
    from_bookworm=()
    for pkg in "${missing[@]}"; do
        [ "$pkg" = qemu-system-arm ] || from_bookworm+=("$pkg")
    done
    if [ "${#from_bookworm[@]}" -gt 0 ]; then
        as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends "${from_bookworm[@]}" >/dev/null
    fi
    # From backports, as the machine's qemu-utils may be: apt would remove it otherwise.
    if [ "${#from_bookworm[@]}" -lt "${#missing[@]}" ]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends -t bookworm-backports qemu-system-arm >/dev/null
    fi
fi
# Debian's rustc builds core from rust-web-src's sources; rustup's cargo drives it.
fw_cargo() {
    (cd "$firmware_dir" \
        && RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$fw_target" cargo "$@")
}
/usr/bin/rustc --version
ld.lld-16 --version
qemu-system-arm --version | head -1

step "build for thumbv7em-none-eabihf (Cortex-M4F)"
fw_cargo build --release

# The features the firmware enables on fusegraph-embedded-demo: the host build takes the same.
host_features="$(python3 -c '
import tomllib
dep = tomllib.load(open("Cargo.toml", "rb"))["dependencies"]["fusegraph-embedded-demo"]
print(",".join(dep.get("features", [])) if isinstance(dep, dict) else "")')"
echo "features of fusegraph-embedded-demo: ${host_features:-(none)}"
# The firmware's GEMM rounds each multiply-add once (`vfma.f32`, `--cfg fusegraph_core_fma` in
# .cargo/config.toml): the host build that gives its bits detects the CPU (feature `std`) and
# runs the AVX2+FMA kernel, which rounds once too, in the same order.
grep -qw fma /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo \
    || fail "the host check needs a CPU with AVX2 and FMA (its GEMM rounds as the firmware's)"
host_features="${host_features:+$host_features,}fusegraph/std"

# check ELF HOST_BIN MAX_FLASH MAX_STACK MAX_PER_FLOP MAX_RAM: runs the firmware, compares its
# report with the host build's, checks its sizes and counts its instructions.
check() {
    local elf="$elf_dir/$1" host_bin="$2" out="$fw_target/$1.out" status=0
    step "$1: run in QEMU"
    timeout "$QEMU_TIMEOUT" qemu-system-arm -machine mps2-an386 -cpu cortex-m4 -nographic \
        -semihosting-config enable=on,target=native -kernel "$elf" >"$out" || status=$?
    cat "$out"
    [ "$status" -eq 0 ] || fail "$1 exited with status $status (124: it ran out of time)"

    step "$1: the same report on the host (--bin $host_bin)"
    local host
    host="$(cd "$root" && FUSEGRAPH_CPU_CAPABILITY=avx2 CARGO_TARGET_DIR="$host_target" \
        cargo run --release -q -p fusegraph-embedded-demo --no-default-features \
        --features "$host_features" --bin "$host_bin" | grep '^steps ')"
    echo "host:     $host"
    echo "firmware: $(grep '^steps ' "$out")"
    [ "$host" = "$(grep '^steps ' "$out")" ] || fail "$1 and the host build report other bits"

    step "$1: flash, RAM, instructions"
    python3 scripts/sizes.py "$elf" "$out" --max-flash "$3" \
        --max-other-statics "$MAX_OTHER_STATICS" --max-stack "$4" --max-ram "$6"
    python3 scripts/instructions.py "$elf" --max-per-flop "$5"
}
check fusegraph-firmware host "$DEMO_MAX_FLASH" "$DEMO_MAX_STACK" "$DEMO_MAX_PER_FLOP" \
    "$DEMO_MAX_RAM"
check digits digits "$DIGITS_MAX_FLASH" "$DIGITS_MAX_STACK" "$DIGITS_MAX_PER_FLOP" \
    "$DIGITS_MAX_RAM"
check finetune finetune "$FINETUNE_MAX_FLASH" "$FINETUNE_MAX_STACK" "$FINETUNE_MAX_PER_FLOP" \
    "$FINETUNE_MAX_RAM"

step "build the no_std demo library for thumbv6m-none-eabi and riscv32imac-unknown-none-elf"
# One cargo for both targets, so that their two builds of core share the cores.
fw_cargo build --release -p fusegraph-embedded-demo --lib \
    --target thumbv6m-none-eabi --target riscv32imac-unknown-none-elf

step "ok"
