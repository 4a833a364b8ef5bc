#!/usr/bin/env python3
"""Counts the instructions of a firmware's train steps under QEMU.

QEMU runs the firmware with one instruction per translation block and logs every block it
executes (`-d exec,nochain`): one line per instruction, ending with the name of the function it
belongs to. The firmware prints `counted_steps N flops_per_step F` and then calls
`fusegraph_count_mark` before and after those N steps; the instructions between the two calls,
divided by N, are the instructions of a step, and divided by F, the instructions per
floating-point operation (F is computed by the firmware from its layers' shapes).

    instructions.py <elf> [--max-per-flop R]

Prints `instructions_per_step I flops_per_step F instructions_per_flop R`; exits 1 if R is
above the limit given.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

MARK = "fusegraph_count_mark"
QEMU = [
    "qemu-system-arm", "-machine", "mps2-an386", "-cpu", "cortex-m4", "-nographic",
    "-semihosting-config", "enable=on,target=native",
    "-accel", "tcg,one-insn-per-tb=on", "-d", "exec,nochain",
]


def count(elf):
    """(instructions between the two marks, steps, flops per step)."""
    with tempfile.TemporaryDirectory() as tmp:
        fifo = os.path.join(tmp, "trace")
        os.mkfifo(fifo)
        qemu = subprocess.Popen(QEMU + ["-D", fifo, "-kernel", elf],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        marks, inside, instructions = 0, False, 0
        try:
            with open(fifo, "r", errors="replace") as trace:
                for line in trace:
                    at_mark = line.rstrip().endswith(MARK)
                    if at_mark and not inside:
                        marks += 1
                        if marks == 2:
                            break
                    inside = at_mark
                    if marks == 1 and not at_mark:
                        instructions += 1
        finally:
            qemu.kill()
            out = qemu.communicate()[0].decode(errors="replace")
    if marks < 2:
        sys.exit(f"the trace did not show two calls of {MARK}")
    found = re.search(r"counted_steps (\d+) flops_per_step (\d+)", out)
    if not found:
        sys.exit("the firmware did not print `counted_steps N flops_per_step F`")
    return instructions, int(found.group(1)), int(found.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("elf")
    parser.add_argument("--max-per-flop", type=float)
    args = parser.parse_args()
    instructions, steps, flops = count(args.elf)
    per_step = instructions / steps
    per_flop = per_step / flops
    print(f"instructions_per_step {per_step:.0f} flops_per_step {flops} "
          f"instructions_per_flop {per_flop:.2f}")
    if args.max_per_flop is not None and per_flop > args.max_per_flop:
        sys.exit(f"{per_flop:.2f} instructions per floating-point operation is above "
                 f"{args.max_per_flop}")


if __name__ == "__main__":
    main()
