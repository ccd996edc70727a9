"""torch eager, torch.compile and jax.jit on bench_train's workloads (same shapes, same steps).

Run with bench/.venv/bin/python; prints `workload: framework X us` lines.
"""

import os
import statistics
import time


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


def report(workload, framework, us):
    print(f"{workload}: {framework} {us:.3f} us", flush=True)


def torch_benches():
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
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

    report("train_chapter_step", "torch", per_step_us(run(chapter_step)))
    try:
        compiled = torch.compile(chapter_step)
        report("train_chapter_step", "torch.compile", per_step_us(run(compiled), batches=5, calls=100))
    except Exception as e:  # noqa: BLE001
        print(f"train_chapter_step: torch.compile skipped: {str(e).splitlines()[0]}")

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

    report("train_mlp_step", "torch", per_step_us(run_mlp(mlp_step), batches=7, calls=20))
    try:
        compiled = torch.compile(mlp_step)
        report("train_mlp_step", "torch.compile", per_step_us(run_mlp(compiled), batches=7, calls=20))
    except Exception as e:  # noqa: BLE001
        print(f"train_mlp_step: torch.compile skipped: {str(e).splitlines()[0]}")


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

    report("train_chapter_step", "jax.jit", per_step_us(once))

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

    report("train_mlp_step", "jax.jit", per_step_us(once_mlp, batches=7, calls=20))


def main():
    for name, fn in (("torch", torch_benches), ("jax", jax_benches)):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            print(f"train: {name} skipped: {str(e).splitlines()[0] if str(e) else type(e).__name__}")


if __name__ == "__main__":
    main()
