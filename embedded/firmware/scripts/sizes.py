#!/usr/bin/env python3
"""Prints and checks a firmware's flash and RAM.

Flash is what the part stores: `.vector_table`, `.text`, `.rodata` and the initial values of
`.data`. RAM is the statics (`.data`, `.bss`, `.uninit`) plus the stack. The statics must be the
train step's compile-time budget (`step_bytes`, which the model's `max_bytes` bounds when it
compiles) plus at most a few other bytes; the stack is the high-water mark the firmware
measured on its painted stack. Both numbers come from the firmware's output
(`step_bytes B stack_peak_bytes P`); the section sizes from the ELF file, read with the
standard library alone.

    sizes.py <elf> <firmware output> [--max-flash N] [--max-other-statics N] [--max-stack N]

Prints `flash_bytes F statics_bytes S step_bytes B stack_peak_bytes P ram_bytes R`; exits 1 if
a limit given is exceeded.
"""

import argparse
import re
import struct
import sys

FLASH_SECTIONS = (".vector_table", ".text", ".rodata", ".data")
STATIC_SECTIONS = (".data", ".bss", ".uninit")


def section_sizes(path):
    """{name: size} of the sections of a 32-bit little-endian ELF file."""
    with open(path, "rb") as f:
        elf = f.read()
    if elf[:4] != b"\x7fELF" or elf[4] != 1 or elf[5] != 1:
        sys.exit(f"{path}: not a 32-bit little-endian ELF file")
    shoff, = struct.unpack_from("<I", elf, 0x20)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x2E)
    headers = [struct.unpack_from("<IIIIII", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]  # sh_offset of the section-name table

    def name(offset):
        end = elf.index(b"\0", names_at + offset)
        return elf[names_at + offset:end].decode()

    return {name(h[0]): h[5] for h in headers}


def reported(output_path):
    """(step_bytes, stack_peak_bytes) from the firmware's output."""
    with open(output_path, errors="replace") as f:
        found = re.search(r"step_bytes (\d+) stack_peak_bytes (\d+)", f.read())
    if not found:
        sys.exit("the firmware did not print `step_bytes B stack_peak_bytes P`")
    return int(found.group(1)), int(found.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("elf")
    parser.add_argument("output")
    parser.add_argument("--max-flash", type=int)
    parser.add_argument("--max-other-statics", type=int)
    parser.add_argument("--max-stack", type=int)
    parser.add_argument("--max-ram", type=int)
    args = parser.parse_args()
    sizes = section_sizes(args.elf)
    flash = sum(sizes.get(s, 0) for s in FLASH_SECTIONS)
    statics = sum(sizes.get(s, 0) for s in STATIC_SECTIONS)
    step, stack = reported(args.output)
    print(f"flash_bytes {flash} statics_bytes {statics} step_bytes {step} "
          f"stack_peak_bytes {stack} ram_bytes {statics + stack}")
    failures = []
    if args.max_flash is not None and flash > args.max_flash:
        failures.append(f"flash {flash} bytes is above {args.max_flash}")
    if args.max_other_statics is not None and statics > step + args.max_other_statics:
        failures.append(f"statics {statics} bytes are above the step's {step} bytes "
                        f"plus {args.max_other_statics}")
    if args.max_stack is not None and stack > args.max_stack:
        failures.append(f"stack peak {stack} bytes is above {args.max_stack}")
    if args.max_ram is not None and statics + stack > args.max_ram:
        failures.append(f"statics and stack peak, {statics + stack} bytes, are above "
                        f"{args.max_ram}")
    if failures:
        sys.exit("; ".join(failures))


if __name__ == "__main__":
    main()
