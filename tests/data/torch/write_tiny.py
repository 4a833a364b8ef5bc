"""Writes tiny.safetensors as `safetensors.torch.save_file(fc.state_dict(), path)` writes the
state_dict of `fc = nn.Linear(3, 2)` with weight [[1, 2, 3], [4, 5, 6]] and bias [0.5, -0.25],
using only the standard library (no torch, no safetensors): an 8-byte little-endian header
length, the header as compact JSON (no `__metadata__`; tensors sorted by name, as they all are
F32) padded with spaces to a multiple of 8, then each tensor's float32 values, little-endian, in
C order. `tests/checkpoint/torch_import.rs` checks the bytes against the Rust crate PyTorch's save calls.

Run from this directory: python3 write_tiny.py
"""

import json
import struct

state_dict = {
    "fc.weight": ([2, 3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    "fc.bias": ([2], [0.5, -0.25]),
}

header = {}
data = b""
for name in sorted(state_dict):
    shape, values = state_dict[name]
    raw = struct.pack(f"<{len(values)}f", *values)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw

text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
with open("tiny.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + data)
