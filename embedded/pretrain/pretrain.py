#!/usr/bin/env python3
"""Trains the backbone that the fine-tuning example adapts on the device.

A 64-32(ReLU)-16(ReLU)-5 MLP (`nn.Linear` modules `fc1`, `fc2`, `head`) learns the digits 0 to 4
of the training split of `data/digits.csv`: the split of `embedded/src/digits.rs` (every fifth
image, the first, the sixth, ..., is held out; the others train), the pixels scaled to
`pixel / 8 - 1`. Deterministic: a fixed seed, one thread, `torch.use_deterministic_algorithms`,
mini-batches of 32 in a seeded order, SGD with momentum. Saves `state_dict()` with
`safetensors.torch.save_file` to `digits_0_4.safetensors` beside this script and prints the
held-out accuracy on the digits 0 to 4 (and, for the record, the SHA-256 of the file).

    python3 embedded/pretrain/pretrain.py
"""

import hashlib
import pathlib

import torch
from safetensors.torch import save_file
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent
CSV = HERE.parent.parent / "data" / "digits.csv"
OUT = HERE / "digits_0_4.safetensors"
HOLD_OUT_EVERY = 5
CLASSES = 5
SEED = 0
EPOCHS = 40
BATCH = 32
LR = 0.05
MOMENTUM = 0.9


def load():
    """(x_train, y_train, x_held_out, y_held_out) of the digits 0 to CLASSES - 1."""
    rows = [list(map(int, line.split(","))) for line in CSV.read_text().splitlines()[1:]]
    split = {True: ([], []), False: ([], [])}
    for index, (label, *pixels) in enumerate(rows):
        if label < CLASSES:
            xs, ys = split[index % HOLD_OUT_EVERY == 0]
            xs.append([p / 8.0 - 1.0 for p in pixels])
            ys.append(label)
    (xt, yt), (xh, yh) = split[False], split[True]
    return (torch.tensor(xt), torch.tensor(yt), torch.tensor(xh), torch.tensor(yh))


class Backbone(nn.Module):
    """The MLP whose `fc1` and `fc2` the device keeps frozen in flash."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 16)
        self.head = nn.Linear(16, CLASSES)

    def forward(self, x):
        return self.head(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    xt, yt, xh, yh = load()
    model = Backbone()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = nn.CrossEntropyLoss()
    order = torch.Generator().manual_seed(SEED)
    for _ in range(EPOCHS):
        permutation = torch.randperm(len(yt), generator=order)
        for start in range(0, len(yt), BATCH):
            batch = permutation[start:start + BATCH]
            optimizer.zero_grad()
            loss_fn(model(xt[batch]), yt[batch]).backward()
            optimizer.step()
    with torch.no_grad():
        correct = (model(xh).argmax(1) == yh).sum().item()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(OUT))
    print(f"torch {torch.__version__}: {len(yt)} training images of the digits 0-{CLASSES - 1}, "
          f"{EPOCHS} epochs")
    print(f"held-out accuracy on 0-{CLASSES - 1}: {correct}/{len(yh)} "
          f"({100.0 * correct / len(yh):.2f}%)")
    print(f"{OUT.name} sha256 {hashlib.sha256(OUT.read_bytes()).hexdigest()}")


if __name__ == "__main__":
    main()
