"""Optimizer steps of Muon, LAMB and Adafactor in PyTorch, optax and Keras, timed as
`benches/optim.rs` times fusegraph's (its interleaved tables), for reading beside them.

    python3 benches/muon_frameworks.py [--threads N]     (CPU only)

Needs `pip install torch` (2.9 or later has `torch.optim.Muon`), `pip install jax optax` and, for
the Keras rows, `pip install keras` (run on the JAX backend, which this script selects). A
framework that is not installed is reported and skipped; the others still run.

What a step is, on one fixed gradient (the parameters change from step to step):
- PyTorch eager: `opt.step()` with `p.grad` set once, under `torch.no_grad()`. `torch.optim.Muon`
  (defaults but `lr=1e-3, weight_decay=0.004`) runs Newton-Schulz in bfloat16, as it does by
  design; `torch.optim.Adafactor` factors a matrix. PyTorch has no LAMB.
- optax: `update` then `apply_updates` in one `jax.jit` function whose parameters and state are
  donated, so that a step updates them in place: `optax.contrib.muon` (Newton-Schulz in
  float32), `optax.lamb`, `optax.adafactor` (factored: the matrices' sides are at least 128).
- Keras 3 on JAX: `optimizer.stateless_apply` in one `jax.jit` function, as a Keras train step
  on JAX runs it: `keras.optimizers.Muon`, `Lamb` and `Adafactor` (default hyper-parameters but
  `learning_rate=1e-3`).

Shapes: the matrices of the Rust tables (512x512, 1024x1024, and 1024x256 for Muon). Timing
follows `examples/support/timing.rs`: one warm-up step, then up to 21 samples of `iters` steps
each (fewer where a step is slow, so that a table row takes about ten seconds), median and best
in microseconds per step. `--threads N` (default 1) runs the process on N CPUs (its affinity,
set before JAX is imported, which sizes XLA's thread pool) and sets PyTorch's intra-op
threads; run it once per thread count.
"""

import argparse
import os
import statistics
import sys
import time

REPS = 21
# A sample lasts at least this long; a row at most about ROW_SECONDS.
SAMPLE_SECONDS = 0.05
ROW_SECONDS = 10.0
MUON_SHAPES = [(512, 512), (1024, 1024), (1024, 256)]
SHAPES = [(512, 512), (1024, 1024)]
LR = 1e-3


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args()


def configure_threads(threads):
    """Runs the process on its first `threads` CPUs, before JAX starts (XLA sizes its thread
    pool by the CPUs the process may run on), and tells Keras its backend before its import."""
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, cpus[:threads])
    os.environ.setdefault("KERAS_BACKEND", "jax")


def values(rows, cols, salt):
    """Deterministic values in ±[0.1, 1.1) as a float32 NumPy array."""
    import numpy as np

    i = np.arange(rows * cols, dtype=np.uint64) ^ np.uint64(salt)
    x = (i * np.uint64(0x9E3779B97F4A7C15)) & np.uint64(0xFFFFFFFFFFFFFFFF)
    u = (x >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    sign = np.where((x & np.uint64(1)) == 0, 1.0, -1.0)
    return (sign * (0.1 + u)).astype(np.float32).reshape(rows, cols)


def measure(step, sync):
    """Median and best microseconds per step: a warm-up, then samples of `iters` steps."""
    step()
    sync()
    t = time.perf_counter()
    step()
    sync()
    once = max(time.perf_counter() - t, 1e-7)
    iters = max(1, int(SAMPLE_SECONDS / once))
    reps = max(3, min(REPS, int(ROW_SECONDS / (once * iters))))
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        samples.append((time.perf_counter() - t) / iters * 1e6)
    return statistics.median(samples), min(samples), reps


def report(framework, rule, shape, threads, step, sync):
    med, best, reps = measure(step, sync)
    print(
        f"  {framework:<8} {rule:<10} {shape[0]:>5}x{shape[1]:<5} {threads:>7} "
        f"{med:>12.1f} ({best:>10.1f}) {reps:>5}",
        flush=True,
    )


def torch_rows(threads):
    try:
        import torch
    except ImportError:
        print("  torch: not installed (pip install torch); skipped")
        return
    torch.set_num_threads(threads)
    rules = [
        ("muon", MUON_SHAPES, lambda p: torch.optim.Muon([p], lr=LR, weight_decay=0.004)),
        ("adafactor", SHAPES, lambda p: torch.optim.Adafactor([p], lr=LR)),
    ]
    for rule, name in [("muon", "Muon"), ("adafactor", "Adafactor")]:
        if not hasattr(torch.optim, name):
            print(f"  torch    {rule:<10} (no torch.optim.{name} in torch {torch.__version__})")
            rules = [r for r in rules if r[0] != rule]
    for rule, shapes, make in rules:
        for rows, cols in shapes:
            p = torch.nn.Parameter(torch.from_numpy(values(rows, cols, 2)))
            p.grad = torch.from_numpy(values(rows, cols, 1))
            opt = make(p)

            def step(opt=opt):
                with torch.no_grad():
                    opt.step()

            report("torch", rule, (rows, cols), threads, step, lambda: None)
    print("  torch    lamb       (no LAMB in torch.optim)")


def optax_rows(threads):
    try:
        import jax
        import optax
    except ImportError:
        print("  optax: not installed (pip install jax optax); skipped")
        return
    rules = [
        ("muon", MUON_SHAPES, lambda: optax.contrib.muon(learning_rate=LR)),
        ("lamb", SHAPES, lambda: optax.lamb(learning_rate=LR)),
        ("adafactor", SHAPES, lambda: optax.adafactor(learning_rate=LR)),
    ]
    for rule, shapes, make in rules:
        for rows, cols in shapes:
            opt = make()
            params = {"w": jax.numpy.asarray(values(rows, cols, 2))}
            grads = {"w": jax.numpy.asarray(values(rows, cols, 1))}
            state = opt.init(params)

            def update(params, state, grads, opt=opt):
                updates, state = opt.update(grads, state, params)
                return optax.apply_updates(params, updates), state

            update = jax.jit(update, donate_argnums=(0, 1))
            box = [params, state]

            def step(box=box, update=update, grads=grads):
                box[0], box[1] = update(box[0], box[1], grads)

            def sync(box=box):
                jax.block_until_ready(box[0])

            report("optax", rule, (rows, cols), threads, step, sync)


def keras_rows(threads):
    try:
        import jax
        import keras
    except ImportError:
        print("  keras: not installed (pip install keras, with jax); skipped")
        return
    if keras.backend.backend() != "jax":
        print(f"  keras: on the {keras.backend.backend()} backend, not jax; skipped")
        return
    rules = [
        ("muon", MUON_SHAPES, lambda: keras.optimizers.Muon(learning_rate=LR)),
        ("lamb", SHAPES, lambda: keras.optimizers.Lamb(learning_rate=LR)),
        ("adafactor", SHAPES, lambda: keras.optimizers.Adafactor(learning_rate=LR)),
    ]
    for rule, shapes, make in rules:
        for rows, cols in shapes:
            opt = make()
            var = keras.Variable(values(rows, cols, 2), name="kernel")
            opt.build([var])
            grads = [jax.numpy.asarray(values(rows, cols, 1))]

            def update(trainable, opt_vars, grads, opt=opt):
                return opt.stateless_apply(opt_vars, grads, trainable)

            update = jax.jit(update, donate_argnums=(0, 1))
            box = [[var.value], [v.value for v in opt.variables]]

            def step(box=box, update=update, grads=grads):
                box[0], box[1] = update(box[0], box[1], grads)

            def sync(box=box):
                jax.block_until_ready(box[0])

            report("keras", rule, (rows, cols), threads, step, sync)


def versions():
    found = []
    for name in ["torch", "jax", "optax", "keras"]:
        try:
            module = __import__(name)
            found.append(f"{name} {module.__version__}")
        except ImportError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def main():
    args = arguments()
    configure_threads(args.threads)
    print(f"muon_frameworks: {versions()}; Python {sys.version.split()[0]}; {args.threads} thread(s)")
    print(
        f"  {'framework':<8} {'rule':<10} {'shape':<11} {'threads':>7} "
        f"{'us/step med':>12} {'(best)':>12} {'reps':>5}"
    )
    torch_rows(args.threads)
    optax_rows(args.threads)
    keras_rows(args.threads)


if __name__ == "__main__":
    main()
