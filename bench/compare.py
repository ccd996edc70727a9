"""Measures numpy, torch (eager and torch.compile) and jax.jit on the C++ benchmarks' workloads.

Run with bench/.venv/bin/python. Workload names match bench_eager / bench_jit, so bench/run can
put each framework next to rune. Prints `workload: framework X us` lines and a final JSON line.
Frameworks that are not installed, or fail, are reported as skipped.
"""

import json
import os
import statistics
import sys
import time

BIG = 1 << 24  # 16M float32 elements, as in the C++ benchmarks

results = []


def report(workload, framework, us, note=None):
    print(f"{workload}: {framework} {us:.3f} us" + (f"  ({note})" if note else ""), flush=True)
    entry = {"name": workload, "framework": framework, "us": us}
    if note:
        entry["note"] = note
    results.append(entry)


def skip(workload, framework, reason):
    reason = str(reason).strip().splitlines()[0] if str(reason).strip() else type(reason).__name__
    print(f"{workload}: {framework} skipped: {reason}", flush=True)
    results.append({"name": workload, "framework": framework, "skipped": reason})


def median_us(f, reps, warmup=2):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def per_call_us(f, batches=20, calls=2000):
    """Median over batches of the mean per-call time (one clock read per call costs too much)."""
    for _ in range(calls):
        f()
    times = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        times.append((time.perf_counter() - t) * 1e6 / calls)
    return statistics.median(times)


def first_call_us(f):
    t = time.perf_counter()
    f()
    return (time.perf_counter() - t) * 1e6


def run(workload, framework, thunk):
    """Runs one measurement; a failure becomes a skipped row instead of ending the script."""
    try:
        thunk()
    except Exception as e:  # an optional framework may fail in many ways
        skip(workload, framework, f"{type(e).__name__}: {e}")


def bench_numpy():
    import numpy as np

    rng = np.random.default_rng(42)
    x = rng.random(BIG, dtype=np.float32)
    chain_x = rng.uniform(-3, 3, BIG).astype(np.float32)
    a = np.array([1, 2, 3], np.float32)
    b = np.array([4, 5, 6], np.float32)
    run("eager_affine_16M", "numpy",
        lambda: report("eager_affine_16M", "numpy", median_us(lambda: x * 2 + 1, 20)))
    run("eager_op_3", "numpy", lambda: report("eager_op_3", "numpy", per_call_us(lambda: a + b)))

    def chain():
        return (chain_x * 2 + 1) * np.tanh(chain_x) - np.exp(-chain_x * chain_x)

    # numpy runs on one thread, so this row is 1 core against rune's 2.
    run("jit_chain_16M", "numpy",
        lambda: report("jit_chain_16M", "numpy", median_us(chain, 10), "1 thread"))


def bench_torch():
    try:
        import torch
    except Exception as e:
        for w in ("eager_affine_16M", "eager_op_3", "jit_call_3", "jit_chain_16M"):
            skip(w, "torch", f"not installed ({type(e).__name__})")
        return
    torch.set_num_threads(2)  # rune uses both cores of this machine
    g = torch.Generator().manual_seed(42)
    x = torch.rand(BIG, generator=g, dtype=torch.float32)
    chain_x = torch.rand(BIG, generator=g, dtype=torch.float32) * 6 - 3
    a = torch.tensor([1, 2, 3], dtype=torch.float32)
    b = torch.tensor([4, 5, 6], dtype=torch.float32)

    def affine(t):
        return t * 2 + 1

    def chain(t):
        return (t * 2 + 1) * torch.tanh(t) - torch.exp(-t * t)

    with torch.inference_mode():
        run("eager_affine_16M", "torch",
            lambda: report("eager_affine_16M", "torch", median_us(lambda: affine(x), 20)))
        run("eager_op_3", "torch",
            lambda: report("eager_op_3", "torch", per_call_us(lambda: a + b)))
        run("jit_chain_16M", "torch",
            lambda: report("jit_chain_16M", "torch", median_us(lambda: chain(chain_x), 10)))

        def compiled_small():
            f = torch.compile(affine, dynamic=False)
            f(a)  # compiles
            report("jit_call_3", "torch.compile", per_call_us(lambda: f(a), batches=10, calls=1000))

        def compiled_chain():
            f = torch.compile(chain, dynamic=False)
            # Inductor keeps its own on-disk caches, so this first call may be partly warm.
            first = first_call_us(lambda: f(chain_x))
            report("jit_chain_16M", "torch.compile", median_us(lambda: f(chain_x), 10))
            report("jit_first_call_cold", "torch.compile", first, "in-process; own caches")

        run("jit_call_3", "torch.compile", compiled_small)
        run("jit_chain_16M", "torch.compile", compiled_chain)


def bench_jax():
    try:
        import jax
        import jax.numpy as jnp
    except Exception as e:
        for w in ("jit_call_3", "jit_chain_16M"):
            skip(w, "jax.jit", f"not installed ({type(e).__name__})")
        return
    key = jax.random.PRNGKey(42)
    chain_x = jax.random.uniform(key, (BIG,), jnp.float32, -3, 3).block_until_ready()
    a = jnp.array([1, 2, 3], jnp.float32)

    def affine(t):
        return t * 2 + 1

    def chain(t):
        return (t * 2 + 1) * jnp.tanh(t) - jnp.exp(-t * t)

    def small():
        f = jax.jit(affine)
        f(a).block_until_ready()
        report("jit_call_3", "jax.jit", per_call_us(lambda: f(a).block_until_ready()))

    def big():
        f = jax.jit(chain)
        first = first_call_us(lambda: f(chain_x).block_until_ready())
        report("jit_chain_16M", "jax.jit", median_us(lambda: f(chain_x).block_until_ready(), 10))
        report("jit_first_call_cold", "jax.jit", first, "in-process compile")

    run("jit_call_3", "jax.jit", small)
    run("jit_chain_16M", "jax.jit", big)


def main():
    # Keep frameworks' thread pools at the machine's cores, as rune's is.
    os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    bench_numpy()
    bench_torch()
    bench_jax()
    print(json.dumps({"bench": "compare", "python": sys.version.split()[0], "results": results}))


if __name__ == "__main__":
    main()
