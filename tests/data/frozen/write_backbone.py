"""Writes backbone.safetensors as `safetensors.torch.save_file(model.state_dict(), path)` writes
the state of this PyTorch module, with the standard library alone (no torch needed):

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(4, 3)   # weight [3, 4] (out, in), bias [3]
            self.fc2 = nn.Linear(3, 2)   # weight [2, 3], bias [2]

Values: fc1.weight[o][i] = (10 * o + i) / 100, fc1.bias[o] = -o / 10,
fc2.weight[o][i] = (o - i) / 4, fc2.bias = [0.5, -0.5]: each value says where it is, so a
test can check that the layout was converted. The format: an 8-byte little-endian header
length, the JSON header (keys sorted, offsets into the data, padded with spaces to a multiple
of 8 bytes), then each tensor's little-endian float32 values in C order.
"""

import json
import struct
import sys

TENSORS = {
    "fc1.weight": ([3, 4], [(10 * o + i) / 100 for o in range(3) for i in range(4)]),
    "fc1.bias": ([3], [-o / 10 for o in range(3)]),
    "fc2.weight": ([2, 3], [(o - i) / 4 for o in range(2) for i in range(3)]),
    "fc2.bias": ([2], [0.5, -0.5]),
}


def write(path):
    header, data = {}, b""
    for key in sorted(TENSORS):
        shape, values = TENSORS[key]
        raw = struct.pack("<%df" % len(values), *values)
        header[key] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    write(sys.argv[1] if len(sys.argv) > 1 else "backbone.safetensors")
