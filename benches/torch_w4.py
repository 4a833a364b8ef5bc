"""W4 in PyTorch eager, timed as bench_train times fusegraph's W4.

    python3 benches/torch_w4.py          (needs `pip install torch`; CPU only)

The same network as `examples/bench_train.rs` (conv 5x5x16 valid ReLU, max pool 2, conv 5x5x32
valid ReLU, max pool 2, flatten 512, dense 128 ReLU, dense 10, softmax cross-entropy, Adam lr
1e-3), channels-last input, batch 8 and 64, one thread then two (`torch.set_num_threads`). A
train step is `zero_grad(set_to_none=True)`, forward, loss, backward and `opt.step()`, with the
first layer's input gradient not computed, as in fusegraph's `TrainStep::run`. Timing follows
`examples/support/timing.rs`: one warm-up step, then 21 samples of `iters` steps each (16 at
batch 8, 2 at batch 64); the table gives the median and the best sample in microseconds per
step, and GFLOP/s of the step's 399 MFLOP of products at batch 64 (the count bench_train
prints).
"""

import time

import torch
from torch import nn

REPS = 21


def w4_flops(batch):
    """Matrix-product FLOPs of one step: bench_train's `w4_flops`."""
    layers = [(24 * 24, 5 * 5, 16), (8 * 8, 5 * 5 * 16, 32), (1, 512, 128), (1, 128, 10)]
    fwd = sum(2 * r * batch * k * n for r, k, n in layers)
    wgrad = fwd
    igrad = sum(2 * r * batch * k * n for r, k, n in layers[1:])
    return fwd + wgrad + igrad


def w4():
    return nn.Sequential(
        nn.Conv2d(1, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(512, 128),
        nn.ReLU(),
        nn.Linear(128, 10),
    )


def step_fn(batch):
    torch.manual_seed(4)
    model = w4().to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(batch, 1, 28, 28).to(memory_format=torch.channels_last) * 2 - 1
    y = torch.arange(batch) % 10

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return step


def measure(step, iters):
    step()
    samples = []
    for _ in range(REPS):
        t = time.perf_counter()
        for _ in range(iters):
            step()
        samples.append((time.perf_counter() - t) / iters)
    samples.sort()
    return samples[len(samples) // 2], samples[0]


def main():
    print(f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        print(f"\nW4 in PyTorch eager, {threads} thread(s)")
        print(f"  {'batch':<6} {'us/step med (best)':>18} {'GFLOP/s med':>12}")
        for batch in (8, 64):
            med, best = measure(step_fn(batch), 16 if batch == 8 else 2)
            gf = w4_flops(batch) / med / 1e9
            print(f"  {batch:<6} {med * 1e6:>8.0f} ({best * 1e6:>7.0f}) {gf:>12.1f}")


if __name__ == "__main__":
    with torch.inference_mode(False):
        main()
