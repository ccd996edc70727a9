"""The other array systems on the C++ benchmarks' workloads: numpy, torch eager, torch.compile,
jax.jit, mx.compile (MLX on the CPU) and tinygrad's TinyJit.

Run with bench/.venv/bin/python (bench/run does, on 2 cores). Workload names match bench_eager,
bench_jit, bench_rows and bench_matmul, so bench/run puts each framework next to rune. Prints
`workload: framework X us` lines and a final JSON line. A framework that is not installed, or
fails on a workload, gives a skipped row with a one-line reason, never a crash.

Every framework is held to 2 threads, as rune is in bench/run: the thread variables below are
set before any import, torch.set_num_threads(2), and bench/run pins this process to 2 CPUs
(taskset) where the machine has more, which XLA's and MLX's pools follow.
"""

import os

THREADS = int(os.environ.get("RUNE_NUM_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = str(THREADS)

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

BIG = 1 << 24  # 16M elements, as in the C++ benchmarks
ROWS, COLS = 4096, 1024
EPS = 1e-5

results = []


def report(workload, framework, us, note=None):
    print(f"{workload}: {framework} {us:.3f} us" + (f"  ({note})" if note else ""), flush=True)
    entry = {"name": workload, "framework": framework, "us": us}
    if note:
        entry["note"] = note
    results.append(entry)


def skip(workload, framework, reason):
    text = str(reason).strip()
    reason = text.splitlines()[0][:160] if text else type(reason).__name__
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


# ---- the inputs: the same distributions as the C++ side (not the same bits) ----
rng = np.random.default_rng(42)
DATA = {
    "x01": rng.random(BIG, dtype=np.float32),                                # affine, sum, mean
    "x01_f64": rng.random(BIG),                                              # affine float64
    "chain": rng.uniform(-3, 3, BIG).astype(np.float32),                     # the chain
    "rows": rng.uniform(-4, 4, (ROWS, COLS)).astype(np.float32),             # softmax, layernorm
    "gain": rng.uniform(0.5, 1.5, COLS).astype(np.float32),
    "bias": rng.uniform(-0.5, 0.5, COLS).astype(np.float32),
    "a256": rng.standard_normal((256, 256), dtype=np.float32),
    "b256": rng.standard_normal((256, 256), dtype=np.float32),
    "a1024": rng.standard_normal((1024, 1024), dtype=np.float32),
    "b1024": rng.standard_normal((1024, 1024), dtype=np.float32),
    "bias1024": rng.standard_normal(1024, dtype=np.float32),
    "three": np.array([1, 2, 3], np.float32),
    "three_b": np.array([4, 5, 6], np.float32),
}


class Framework:
    """What differs between systems: arrays, compiling, waiting, and a few op spellings."""

    name = ""
    compiled = True  # whether functions go through the system's compiler

    def array(self, a):
        return a

    def compile(self, f):
        return f

    def wait(self, y):
        return y

    # op spellings, overridden where the system differs from numpy
    def tanh(self, t):
        return np.tanh(t)

    def exp(self, t):
        return np.exp(t)

    def sqrt(self, t):
        return np.sqrt(t)

    def relu(self, t):
        return np.maximum(t, 0)

    def mean_rows(self, t):
        return t.mean(axis=1, keepdims=True)

    def max_rows(self, t):
        return t.max(axis=1, keepdims=True)

    def softmax(self, t):
        e = self.exp(t - self.max_rows(t))
        return e / e.sum(axis=1, keepdims=True)

    def total_sum(self, t):
        return t.sum()

    def total_mean(self, t):
        return t.mean()


def workloads(fw):
    """(name, function, input names, reps) for every workload this framework can express."""
    affine = lambda t: t * 2 + 1  # noqa: E731

    def chain(t):
        return (t * 2 + 1) * fw.tanh(t) - fw.exp(-t * t)

    def layernorm(t, g, b):
        d = t - fw.mean_rows(t)
        return d / fw.sqrt(fw.mean_rows(d * d) + EPS) * g + b

    return [
        ("jit_affine_16M_f32", affine, ["x01"], 15),
        ("jit_affine_16M_f64", affine, ["x01_f64"], 15),
        ("jit_chain_16M", chain, ["chain"], 10),
        ("sum_16M", fw.total_sum, ["x01"], 15),
        ("mean_16M", fw.total_mean, ["x01"], 15),
        ("softmax_4096x1024", fw.softmax, ["rows"], 10),
        ("layernorm_4096x1024", layernorm, ["rows", "gain", "bias"], 10),
        ("matmul_256", lambda a, b: a @ b, ["a256", "b256"], 41),
        ("matmul_1024", lambda a, b: a @ b, ["a1024", "b1024"], 11),
        ("matmul_bias_relu_1024", lambda a, b, c: fw.relu(a @ b + c), ["a1024", "b1024", "bias1024"], 11),
    ]


def run_framework(fw):
    cache = {}

    def arg(name):
        if name not in cache:
            cache[name] = fw.array(DATA[name])
        return cache[name]

    for name, f, inputs, reps in workloads(fw):
        try:
            args = [arg(i) for i in inputs]
            g = fw.compile(f)
            call = lambda: fw.wait(g(*args))  # noqa: E731
            # Slow systems get fewer repetitions (at least 5), so none takes over the run.
            t = time.perf_counter()
            call()  # compiles where the system compiles
            call()
            once = time.perf_counter() - t
            reps = max(5, min(reps, int(10 / max(once / 2, 1e-9))))
            report(name, fw.name, median_us(call, reps, warmup=1))
        except Exception as e:  # an optional framework may fail in many ways
            skip(name, fw.name, f"{type(e).__name__}: {e}")
    # A compiled call on 3 elements: the fixed cost of one call of a compiled function.
    try:
        a = arg("three")
        if fw.compiled:
            g = fw.compile(lambda t: t * 2 + 1)
            report("jit_call_3", fw.name, per_call_us(lambda: fw.wait(g(a)), batches=10, calls=1000))
        else:  # an eager system: one op, as bench_eager's eager_op_3
            b = arg("three_b")
            report("eager_op_3", fw.name, per_call_us(lambda: fw.wait(a + b)))
    except Exception as e:
        skip("jit_call_3" if fw.compiled else "eager_op_3", fw.name, f"{type(e).__name__}: {e}")


class Numpy(Framework):
    name = "numpy"
    compiled = False


def torch_frameworks():
    import torch

    torch.set_num_threads(THREADS)
    torch.set_grad_enabled(False)

    class Torch(Framework):
        name = "torch"
        compiled = False

        def array(self, a):
            return torch.from_numpy(np.ascontiguousarray(a))

        def tanh(self, t):
            return torch.tanh(t)

        def exp(self, t):
            return torch.exp(t)

        def sqrt(self, t):
            return torch.sqrt(t)

        def relu(self, t):
            return torch.relu(t)

        def mean_rows(self, t):
            return t.mean(dim=1, keepdim=True)

        def softmax(self, t):
            return torch.softmax(t, 1)

    class TorchCompile(Torch):
        name = "torch.compile"
        compiled = True

        def compile(self, f):
            return torch.compile(f, dynamic=False)

    return [Torch(), TorchCompile()]


def jax_framework():
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)  # for the float64 workload; float32 stays float32

    class Jax(Framework):
        name = "jax.jit"

        def array(self, a):
            return jax.device_put(a)

        def compile(self, f):
            return jax.jit(f)

        def wait(self, y):
            return y.block_until_ready()

        def tanh(self, t):
            return jnp.tanh(t)

        def exp(self, t):
            return jnp.exp(t)

        def sqrt(self, t):
            return jnp.sqrt(t)

        def relu(self, t):
            return jax.nn.relu(t)

        def softmax(self, t):
            return jax.nn.softmax(t, axis=1)

    return [Jax()]


def mlx_framework():
    import mlx.core as mx

    mx.set_default_device(mx.cpu)

    class Mlx(Framework):
        name = "mx.compile"

        def array(self, a):
            return mx.array(a)

        def compile(self, f):
            return mx.compile(f)

        def wait(self, y):
            mx.eval(y)
            return y

        def tanh(self, t):
            return mx.tanh(t)

        def exp(self, t):
            return mx.exp(t)

        def sqrt(self, t):
            return mx.sqrt(t)

        def relu(self, t):
            return mx.maximum(t, 0)

        def softmax(self, t):
            return mx.softmax(t, axis=1)

    return [Mlx()]


def tinygrad_framework():
    from tinygrad import Device, Tensor, TinyJit

    class Tinygrad(Framework):
        name = "tinygrad"

        def array(self, a):
            return Tensor(a).realize()

        def compile(self, f):
            # TinyJit replays kernels captured on its second call; the result must be realized.
            return TinyJit(lambda *args: f(*args).realize())

        def wait(self, y):
            Device[Device.DEFAULT].synchronize()
            return y

        def tanh(self, t):
            return t.tanh()

        def exp(self, t):
            return t.exp()

        def sqrt(self, t):
            return t.sqrt()

        def relu(self, t):
            return t.relu()

        def mean_rows(self, t):
            return t.mean(axis=1, keepdim=True)

        def max_rows(self, t):
            return t.max(axis=1, keepdim=True)

        def softmax(self, t):
            return t.softmax(1)

    return [Tinygrad()]


def main():
    which = sys.argv[1:]  # optional: only these frameworks (numpy torch jax mlx tinygrad)
    groups = [("numpy", lambda: [Numpy()]), ("torch", torch_frameworks), ("jax", jax_framework),
              ("mlx", mlx_framework), ("tinygrad", tinygrad_framework)]
    names = {"numpy": ["numpy"], "torch": ["torch", "torch.compile"], "jax": ["jax.jit"],
             "mlx": ["mx.compile"], "tinygrad": ["tinygrad"]}
    for group, make in groups:
        if which and group not in which:
            continue
        try:
            fws = make()
        except Exception as e:  # not installed, or fails to start
            for fw in names[group]:
                skip("*", fw, f"unavailable: {type(e).__name__}: {e}")
            continue
        for fw in fws:
            t = time.perf_counter()
            run_framework(fw)
            print(f"# {fw.name}: {time.perf_counter() - t:.0f} s", flush=True)
    print(json.dumps({"bench": "compare", "python": sys.version.split()[0], "threads": THREADS,
                      "results": results}))


if __name__ == "__main__":
    main()
