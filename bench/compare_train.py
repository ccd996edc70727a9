"""torch eager, torch.compile, jax.jit, mx.compile (MLX on the CPU) and tinygrad's TinyJit on
bench_train's and bench_mlp's workloads (same shapes, same steps).

Run with bench/.venv/bin/python; prints `workload: framework X us` lines and a final JSON line
in compare.py's format. Every framework is held to 2 threads (see compare.py); a framework that
fails gives a skipped row with a one-line reason.
"""

import os

THREADS = int(os.environ.get("RUNE_NUM_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = str(THREADS)

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from results import attempt, report, results, skip  # noqa: E402  (bench/results.py)


def per_step_us(f, batches=11, calls=200):
    for _ in range(calls):
        f()
    out = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        out.append((time.perf_counter() - t) * 1e6 / calls)
    return statistics.median(out)




def torch_benches():
    import torch

    torch.set_num_threads(THREADS)
    inputs = torch.tensor([0.0, 1, 2, 3], dtype=torch.float64)
    targets = torch.tensor([1.0, 3, 5, 7], dtype=torch.float64)

    def chapter_step(w, b):
        w = w.detach().requires_grad_()
        b = b.detach().requires_grad_()
        err = w * inputs + b - targets
        loss = (err * err).mean()
        gw, gb = torch.autograd.grad(loss, (w, b))
        return loss.detach(), (w - gw * 0.1).detach(), (b - gb * 0.1).detach()

    state = [torch.tensor(0.0, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64)]

    def run(step):
        def once():
            _, state[0], state[1] = step(state[0], state[1])
        return once

    attempt("train_chapter_step", "torch",
            lambda: report("train_chapter_step", "torch", per_step_us(run(chapter_step))))
    # torch.compile gets each step written with torch.func (functional gradients, which dynamo
    # traces into one graph); the eager-autograd form above recompiles on every call (its
    # requires_grad_ leaves are new tensors each time) until dynamo's cache limit, then runs
    # eagerly, which measured recompilation rather than compiled code.
    from torch.func import grad_and_value

    def chapter_loss(ps):
        err = ps[0] * inputs + ps[1] - targets
        return (err * err).mean()

    def chapter_step_functional(w, b):
        (gw, gb), loss = grad_and_value(chapter_loss)((w, b))
        return loss, w - gw * 0.1, b - gb * 0.1

    attempt("train_chapter_step", "torch.compile",
            lambda: report("train_chapter_step", "torch.compile",
                           per_step_us(run(torch.compile(chapter_step_functional)), batches=5,
                                       calls=100)))

    g = torch.Generator().manual_seed(0)
    x = torch.rand(128, 784, generator=g)
    y = torch.nn.functional.one_hot(torch.randint(0, 10, (128,), generator=g), 10).float()
    params = [torch.randn(784, 256, generator=g) * 0.05, torch.zeros(256), torch.randn(256, 10, generator=g) * 0.05,
              torch.zeros(10)]

    def mlp_step(w1, b1, w2, b2):
        ps = [p.detach().requires_grad_() for p in (w1, b1, w2, b2)]
        h = torch.relu(x @ ps[0] + ps[1])
        logits = h @ ps[2] + ps[3]
        loss = -(y * torch.log_softmax(logits, 1)).sum(1).mean()
        grads = torch.autograd.grad(loss, ps)
        return [loss.detach()] + [(p - gr * 0.1).detach() for p, gr in zip(ps, grads)]

    def run_mlp(step):
        def once():
            out = step(*params)
            params[:] = out[1:]
        return once

    attempt("train_mlp_step", "torch",
            lambda: report("train_mlp_step", "torch", per_step_us(run_mlp(mlp_step), batches=7, calls=20)))
    def mlp_loss(ps):
        h = torch.relu(x @ ps[0] + ps[1])
        logits = h @ ps[2] + ps[3]
        return -(y * torch.log_softmax(logits, 1)).sum(1).mean()

    def mlp_step_functional(*ps):
        grads, loss = grad_and_value(mlp_loss)(ps)
        return [loss] + [p - gr * 0.1 for p, gr in zip(ps, grads)]

    attempt("train_mlp_step", "torch.compile",
            lambda: report("train_mlp_step", "torch.compile",
                           per_step_us(run_mlp(torch.compile(mlp_step_functional)), batches=7,
                                       calls=20)))

    # The README demo's step (bench_train.cpp): a 2-64-2 tanh MLP on 400 points, SGD at lr 1.
    rx = torch.randn(400, 2, generator=g)
    ry = torch.nn.functional.one_hot(torch.arange(400) % 2, 2).float()
    rparams = [torch.randn(2, 64, generator=g) * 0.5 ** 0.5, torch.zeros(64),
               torch.randn(64, 2, generator=g) * (1 / 64) ** 0.5, torch.zeros(2)]

    def readme_step(w1, b1, w2, b2):
        ps = [p.detach().requires_grad_() for p in (w1, b1, w2, b2)]
        logits = torch.tanh(rx @ ps[0] + ps[1]) @ ps[2] + ps[3]
        loss = -(ry * torch.log_softmax(logits, 1)).sum(1).mean()
        grads = torch.autograd.grad(loss, ps)
        return [loss.detach()] + [(p - gr).detach() for p, gr in zip(ps, grads)]

    def run_readme(step):
        def once():
            out = step(*rparams)
            rparams[:] = out[1:]
        return once

    attempt("readme_mlp_step", "torch",
            lambda: report("readme_mlp_step", "torch", per_step_us(run_readme(readme_step), calls=100)))
    def readme_loss(ps):
        logits = torch.tanh(rx @ ps[0] + ps[1]) @ ps[2] + ps[3]
        return -(ry * torch.log_softmax(logits, 1)).sum(1).mean()

    def readme_step_functional(*ps):
        grads, loss = grad_and_value(readme_loss)(ps)
        return [loss] + [p - gr for p, gr in zip(ps, grads)]

    attempt("readme_mlp_step", "torch.compile",
            lambda: report("readme_mlp_step", "torch.compile",
                           per_step_us(run_readme(torch.compile(readme_step_functional)), calls=100)))


def jax_benches():
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    inputs = jnp.array([0.0, 1, 2, 3], dtype=jnp.float64)
    targets = jnp.array([1.0, 3, 5, 7], dtype=jnp.float64)

    def mse(p):
        err = p[0] * inputs + p[1] - targets
        return jnp.mean(err * err)

    @jax.jit
    def step(p):
        loss, g = jax.value_and_grad(mse)(p)
        return loss, (p[0] - g[0] * 0.1, p[1] - g[1] * 0.1)

    state = [(jnp.float64(0), jnp.float64(0))]

    def once():
        loss, state[0] = step(state[0])
        loss.block_until_ready()

    attempt("train_chapter_step", "jax.jit", lambda: report("train_chapter_step", "jax.jit", per_step_us(once)))

    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.uniform(k1, (128, 784), dtype=jnp.float32)
    y = jax.nn.one_hot(jax.random.randint(k2, (128,), 0, 10), 10, dtype=jnp.float32)
    params = [jax.random.normal(k3, (784, 256), dtype=jnp.float32) * 0.05, jnp.zeros(256, jnp.float32),
              jax.random.normal(k1, (256, 10), dtype=jnp.float32) * 0.05, jnp.zeros(10, jnp.float32)]

    def loss_fn(ps):
        h = jax.nn.relu(x @ ps[0] + ps[1])
        logits = h @ ps[2] + ps[3]
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, 1), 1))

    @jax.jit
    def mlp_step(ps):
        loss, g = jax.value_and_grad(loss_fn)(ps)
        return loss, [p - gr * 0.1 for p, gr in zip(ps, g)]

    holder = [params]

    def once_mlp():
        loss, holder[0] = mlp_step(holder[0])
        loss.block_until_ready()

    attempt("train_mlp_step", "jax.jit",
            lambda: report("train_mlp_step", "jax.jit", per_step_us(once_mlp, batches=7, calls=20)))

    # The README demo's step (bench_train.cpp).
    k4, k5, k6 = jax.random.split(k3, 3)
    rx = jax.random.normal(k4, (400, 2), dtype=jnp.float32)
    ry = jax.nn.one_hot(jnp.arange(400) % 2, 2, dtype=jnp.float32)
    rparams = [jax.random.normal(k5, (2, 64), dtype=jnp.float32) * 0.5 ** 0.5, jnp.zeros(64, jnp.float32),
               jax.random.normal(k6, (64, 2), dtype=jnp.float32) * (1 / 64) ** 0.5, jnp.zeros(2, jnp.float32)]

    def readme_loss(ps):
        logits = jnp.tanh(rx @ ps[0] + ps[1]) @ ps[2] + ps[3]
        return -jnp.mean(jnp.sum(ry * jax.nn.log_softmax(logits, 1), 1))

    @jax.jit
    def readme_step(ps):
        loss, g = jax.value_and_grad(readme_loss)(ps)
        return loss, [p - gr for p, gr in zip(ps, g)]

    rholder = [rparams]

    def once_readme():
        loss, rholder[0] = readme_step(rholder[0])
        loss.block_until_ready()

    attempt("readme_mlp_step", "jax.jit",
            lambda: report("readme_mlp_step", "jax.jit", per_step_us(once_readme, calls=100)))


def mlx_benches():
    import mlx.core as mx
    import numpy as np

    mx.set_default_device(mx.cpu)
    inputs = mx.array(np.array([0.0, 1, 2, 3]), dtype=mx.float64)
    targets = mx.array(np.array([1.0, 3, 5, 7]), dtype=mx.float64)

    def mse(p):
        err = p[0] * inputs + p[1] - targets
        return mx.mean(err * err)

    grad = mx.value_and_grad(mse)

    @mx.compile
    def step(w, b):
        loss, g = grad([w, b])
        return loss, w - g[0] * 0.1, b - g[1] * 0.1

    state = [mx.array(0.0, dtype=mx.float64), mx.array(0.0, dtype=mx.float64)]

    def once():
        loss, state[0], state[1] = step(*state)
        mx.eval(loss, state[0], state[1])

    attempt("train_chapter_step", "mx.compile",
            lambda: report("train_chapter_step", "mx.compile", per_step_us(once)))

    rng = np.random.default_rng(0)
    x = mx.array(rng.random((128, 784), dtype=np.float32))
    y = mx.array(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)])
    params = [mx.array(rng.standard_normal((784, 256), dtype=np.float32) * 0.05), mx.zeros((256,)),
              mx.array(rng.standard_normal((256, 10), dtype=np.float32) * 0.05), mx.zeros((10,))]

    def loss_fn(ps):
        h = mx.maximum(x @ ps[0] + ps[1], 0)
        logits = h @ ps[2] + ps[3]
        logp = logits - mx.logsumexp(logits, axis=1, keepdims=True)
        return -mx.mean(mx.sum(y * logp, axis=1))

    mlp_grad = mx.value_and_grad(loss_fn)

    @mx.compile
    def mlp_step(*ps):
        loss, g = mlp_grad(list(ps))
        return [loss] + [p - gr * 0.1 for p, gr in zip(ps, g)]

    holder = [params]

    def once_mlp():
        out = mlp_step(*holder[0])
        mx.eval(out)
        holder[0] = out[1:]

    attempt("train_mlp_step", "mx.compile",
            lambda: report("train_mlp_step", "mx.compile", per_step_us(once_mlp, batches=7, calls=20)))


def tinygrad_benches():
    import numpy as np
    from tinygrad import Tensor, TinyJit, dtypes

    inputs = Tensor(np.array([0.0, 1, 2, 3]), dtype=dtypes.float64).realize()
    targets = Tensor(np.array([1.0, 3, 5, 7]), dtype=dtypes.float64).realize()

    # TinyJit replays the kernels captured on its second call; parameters are updated in place
    # (assign), as tinygrad's optimizers do.
    def chapter():
        w = Tensor(np.array(0.0), dtype=dtypes.float64).realize()
        b = Tensor(np.array(0.0), dtype=dtypes.float64).realize()

        @TinyJit
        def step():
            err = w * inputs + b - targets
            loss = (err * err).mean()
            gw, gb = loss.gradient(w, b)
            w.assign(w - gw * 0.1)
            b.assign(b - gb * 0.1)
            return loss.realize(w, b)

        report("train_chapter_step", "tinygrad", per_step_us(lambda: step().item(), batches=5, calls=100))

    attempt("train_chapter_step", "tinygrad", chapter)

    def mlp():
        rng = np.random.default_rng(0)
        x = Tensor(rng.random((128, 784), dtype=np.float32)).realize()
        y = Tensor(np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]).realize()
        ps = [Tensor(rng.standard_normal((784, 256), dtype=np.float32) * 0.05),
              Tensor(np.zeros(256, np.float32)),
              Tensor(rng.standard_normal((256, 10), dtype=np.float32) * 0.05),
              Tensor(np.zeros(10, np.float32))]
        for p in ps:
            p.realize()

        @TinyJit
        def step():
            h = (x @ ps[0] + ps[1]).relu()
            logits = h @ ps[2] + ps[3]
            loss = -(y * logits.log_softmax(1)).sum(1).mean()
            grads = loss.gradient(*ps)
            for p, g in zip(ps, grads):
                p.assign(p - g * 0.1)
            return loss.realize(*ps)

        report("train_mlp_step", "tinygrad", per_step_us(lambda: step().item(), batches=7, calls=20))

    attempt("train_mlp_step", "tinygrad", mlp)


def main():
    for name, fn in (("torch", torch_benches), ("jax", jax_benches), ("mlx", mlx_benches),
                     ("tinygrad", tinygrad_benches)):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            for w in ("train_chapter_step", "train_mlp_step"):
                skip(w, {"torch": "torch", "jax": "jax.jit", "mlx": "mx.compile"}.get(name, name), e)
    print(json.dumps({"bench": "compare_train", "python": sys.version.split()[0], "threads": THREADS,
                      "results": results}))


if __name__ == "__main__":
    main()
