"""Writes the test fixtures as `safetensors.torch.save_file(module.state_dict(), path)` writes
them, using only the standard library (no torch, no safetensors): an 8-byte little-endian header
length, the header as compact JSON (no `__metadata__`; tensors sorted by name, as they all are
F32) padded with spaces to a multiple of 8, then each tensor's float32 values, little-endian, in
C order. `tests/checkpoint/torch_import.rs` checks the bytes against the Rust crate PyTorch's
save calls.

- tiny.safetensors: `fc = nn.Linear(3, 2)` with weight [[1, 2, 3], [4, 5, 6]] and bias
  [0.5, -0.25].
- backbone.safetensors: a module with `fc1 = nn.Linear(4, 3)` and `fc2 = nn.Linear(3, 2)`
  whose values say where they are: fc1.weight[o][i] = (10 o + i) / 100, fc1.bias[o] = -o / 10,
  fc2.weight[o][i] = (o - i) / 4, fc2.bias = [0.5, -0.5] (`tests/frozen.rs` reads it
  into `static`s when it compiles and checks the layout).

Run from this directory: python3 write_fixtures.py
"""

import json
import struct

FIXTURES = {
    "tiny.safetensors": {
        "fc.weight": ([2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        "fc.bias": ([2], [0.5, -0.25]),
    },
    "backbone.safetensors": {
        "fc1.weight": ([3, 4], [(10 * o + i) / 100 for o in range(3) for i in range(4)]),
        "fc1.bias": ([3], [-o / 10 for o in range(3)]),
        "fc2.weight": ([2, 3], [(o - i) / 4 for o in range(2) for i in range(3)]),
        "fc2.bias": ([2], [0.5, -0.5]),
    },
}


def write(path, state_dict):
    header = {}
    data = b""
    for name in sorted(state_dict):
        shape, values = state_dict[name]
        raw = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


for path, state_dict in FIXTURES.items():
    write(path, state_dict)
