"""torch eager, torch.compile and jax.jit on bench_conv's workloads (same shapes, same math), for
bench/run's convolution rows (docs/performance.md "Convolutions").

- conv3x3_fwd_32x64x32x32: a 3x3 convolution 64 -> 64 channels, padding 1 (SAME), of
  32 x 64 x 32 x 32 float32 images, channels first (NCHW, OIHW). torch's CPU convolution is
  oneDNN's (aten::mkldnn_convolution; checked here with torch's profiler and noted in the row).
- conv3x3_fwd_bwd_32x64x32x32: the same forward pass and the gradients of sum(conv(x, k) * dy)
  with respect to x and k.
- maxpool2x2_32x64x32x32: 2x2 max pooling, stride 2, of the same images.
- cnn_train_step_b128: one training step of samples/cnn.cpp's model (samples/cnn_model.h):
  conv3x3(1 -> 32) + ReLU + 2x2 max pool, conv3x3(32 -> 64) + ReLU + 2x2 max pool, dropout 0.25,
  dense 3136 -> 128 + ReLU, dropout 0.25, dense 128 -> 10, softmax cross-entropy, AdamW (lr 1e-3,
  weight decay 1e-4, cosine decay); a batch of 128 gathered by index from 1,024 images. torch
  runs channels first (its native layout), JAX channels last (as rune).

Run with bench/.venv/bin/python; prints `workload: framework X us` lines and a final JSON line in
compare.py's format. Every framework is held to 2 threads (see compare.py); a framework that fails
gives a skipped row with a one-line reason.
"""

import os

THREADS = int(os.environ.get("RUNE_NUM_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = str(THREADS)

import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

N, C, H, W, O = 32, 64, 32, 32, 64
B, POOL = 128, 1024
LR, WD, DROP, TOTAL = 1e-3, 1e-4, 0.25, 5000
REPS, WARMUP = 11, 2
from results import attempt, results, skip  # noqa: E402  (bench/results.py)
from results import report as report_digits  # noqa: E402


def report(workload, framework, us, note=None):
    report_digits(workload, framework, us, note, digits=1)

rng = np.random.default_rng(40)
X = rng.standard_normal((N, C, H, W), dtype=np.float32)
K = (rng.standard_normal((O, C, 3, 3), dtype=np.float32) * math.sqrt(2 / (C * 9))).astype(np.float32)
DY = rng.standard_normal((N, O, H, W), dtype=np.float32)
IMAGES = rng.standard_normal((POOL, 28, 28, 1), dtype=np.float32)  # channels last
LABELS = rng.integers(0, 10, POOL).astype(np.int64)
BATCHES = [np.arange(b * B, (b + 1) * B) for b in range(POOL // B)]


def median_us(f, reps=REPS, warmup=WARMUP):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)




def he(shape, fan_in, scale=1.0):
    return (rng.standard_normal(shape, dtype=np.float32) * math.sqrt(2 / fan_in) * scale).astype(np.float32)


# The CNN's initial parameters (channels last: HWIO kernels; torch gets them as OIHW).
CNN = [he((3, 3, 1, 32), 9), np.zeros(32, np.float32), he((3, 3, 32, 64), 32 * 9),
       np.zeros(64, np.float32), he((3136, 128), 3136), np.zeros(128, np.float32),
       he((128, 10), 128, math.sqrt(0.5)), np.zeros(10, np.float32)]


def lr_at(count):
    return LR * 0.5 * (1 + math.cos(math.pi * min(count, TOTAL) / TOTAL))


def torch_benches():
    import torch
    import torch.nn.functional as F
    from torch.func import grad_and_value

    torch.set_num_threads(THREADS)
    x, k, dy = torch.from_numpy(X), torch.from_numpy(K), torch.from_numpy(DY)

    # Which kernel torch's convolution runs (oneDNN on CPU builds with mkldnn).
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof, torch.no_grad():
        F.conv2d(x, k, padding=1)
    ops = {e.key for e in prof.key_averages()}
    native = "oneDNN (aten::mkldnn_convolution)" if "aten::mkldnn_convolution" in ops else \
        "native: " + ", ".join(sorted(o for o in ops if "conv" in o))

    def fwd():
        with torch.no_grad():
            return F.conv2d(x, k, padding=1)

    def fwd_bwd_eager():
        xr, kr = x.detach().requires_grad_(), k.detach().requires_grad_()
        loss = (F.conv2d(xr, kr, padding=1) * dy).sum()
        gx, gk = torch.autograd.grad(loss, (xr, kr))
        return loss, gx, gk

    def conv_loss(xk):
        return (F.conv2d(xk[0], xk[1], padding=1) * dy).sum()

    def fwd_bwd_functional(a, b):
        (gx, gk), loss = grad_and_value(conv_loss)((a, b))
        return loss, gx, gk

    def pool():
        with torch.no_grad():
            return F.max_pool2d(x, 2)

    attempt("conv3x3_fwd_32x64x32x32", "torch",
            lambda: report("conv3x3_fwd_32x64x32x32", "torch", median_us(fwd), native))
    attempt("conv3x3_fwd_bwd_32x64x32x32", "torch",
            lambda: report("conv3x3_fwd_bwd_32x64x32x32", "torch", median_us(fwd_bwd_eager), native))
    attempt("maxpool2x2_32x64x32x32", "torch",
            lambda: report("maxpool2x2_32x64x32x32", "torch", median_us(pool)))
    cfwd = torch.compile(lambda a, b: F.conv2d(a, b, padding=1))
    attempt("conv3x3_fwd_32x64x32x32", "torch.compile",
            lambda: report("conv3x3_fwd_32x64x32x32", "torch.compile",
                           median_us(lambda: cfwd(x, k), warmup=3)))
    cgrad = torch.compile(fwd_bwd_functional)
    attempt("conv3x3_fwd_bwd_32x64x32x32", "torch.compile",
            lambda: report("conv3x3_fwd_bwd_32x64x32x32", "torch.compile",
                           median_us(lambda: cgrad(x, k), warmup=3)))
    cpool = torch.compile(lambda a: F.max_pool2d(a, 2))
    attempt("maxpool2x2_32x64x32x32", "torch.compile",
            lambda: report("maxpool2x2_32x64x32x32", "torch.compile",
                           median_us(lambda: cpool(x), warmup=3)))

    # The CNN step, channels first (torch's layout): kernels HWIO -> OIHW, the dense weight's
    # rows from (h, w, c) to (c, h, w) order so the model is the same function.
    images = torch.from_numpy(np.ascontiguousarray(IMAGES.transpose(0, 3, 1, 2)))
    labels = torch.from_numpy(LABELS)
    batches = [torch.from_numpy(b) for b in BATCHES]
    d1 = CNN[4].reshape(7, 7, 64, 128).transpose(2, 0, 1, 3).reshape(3136, 128)
    init = [CNN[0].transpose(3, 2, 0, 1), CNN[1], CNN[2].transpose(3, 2, 0, 1), CNN[3], d1, CNN[5],
            CNN[6], CNN[7]]

    def forward(ps, xb):
        h = F.max_pool2d(F.relu(F.conv2d(xb, ps[0], ps[1], padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, ps[2], ps[3], padding=1)), 2).flatten(1)
        h = F.relu(F.dropout(h, DROP) @ ps[4] + ps[5])
        return F.dropout(h, DROP) @ ps[6] + ps[7]

    def eager_step():
        params = [torch.tensor(np.ascontiguousarray(p), requires_grad=True) for p in init]
        opt = torch.optim.AdamW(params, lr=LR, weight_decay=WD)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda c: lr_at(c) / LR)
        i = [0]

        def once():
            idx = batches[i[0] % len(batches)]
            i[0] += 1
            loss = F.cross_entropy(forward(params, images[idx]), labels[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            return loss.item()

        report("cnn_train_step_b128", "torch", median_us(once))

    attempt("cnn_train_step_b128", "torch", eager_step)

    # torch.compile: the whole step functional (torch.func's gradient and the AdamW update
    # written out), compiled as one graph, as rune compiles its step.
    def compiled_step():
        params = [torch.tensor(np.ascontiguousarray(p)) for p in init]
        mu = [torch.zeros_like(p) for p in params]
        nu = [torch.zeros_like(p) for p in params]

        def loss_of(ps, xb, yb):
            return F.cross_entropy(forward(ps, xb), yb)

        @torch.compile
        def step(ps, m, v, xb, yb, count, lr):
            g, loss = grad_and_value(loss_of)(ps, xb, yb)
            out_p, out_m, out_v = [], [], []
            c1, c2 = 1 - 0.9 ** count, 1 - 0.999 ** count
            for p, gi, mi, vi in zip(ps, g, m, v):
                mi = mi * 0.9 + gi * 0.1
                vi = vi * 0.999 + gi * gi * 0.001
                u = (mi / c1) / (torch.sqrt(vi / c2) + 1e-8) + p * WD
                out_p.append(p - lr * u)
                out_m.append(mi)
                out_v.append(vi)
            return loss, out_p, out_m, out_v

        state = [params, mu, nu, 0]

        def once():
            idx = batches[state[3] % len(batches)]
            state[3] += 1
            count = torch.tensor(float(state[3]))
            lr = torch.tensor(lr_at(state[3] - 1))
            loss, state[0], state[1], state[2] = step(state[0], state[1], state[2], images[idx],
                                                      labels[idx], count, lr)
            return loss.item()

        report("cnn_train_step_b128", "torch.compile", median_us(once, warmup=3))

    attempt("cnn_train_step_b128", "torch.compile", compiled_step)


def jax_benches():
    import jax
    import jax.numpy as jnp
    from jax import lax

    x, k, dy = jnp.asarray(X), jnp.asarray(K), jnp.asarray(DY)
    dn = ("NCHW", "OIHW", "NCHW")

    @jax.jit
    def fwd(a, b):
        return lax.conv_general_dilated(a, b, (1, 1), "SAME", dimension_numbers=dn)

    @jax.jit
    def fwd_bwd(a, b):
        def loss(ab):
            return jnp.sum(lax.conv_general_dilated(ab[0], ab[1], (1, 1), "SAME",
                                                    dimension_numbers=dn) * dy)
        value, (gx, gk) = jax.value_and_grad(loss)((a, b))
        return value, gx, gk

    @jax.jit
    def pool(a):
        return lax.reduce_window(a, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    attempt("conv3x3_fwd_32x64x32x32", "jax.jit",
            lambda: report("conv3x3_fwd_32x64x32x32", "jax.jit",
                           median_us(lambda: fwd(x, k).block_until_ready())))
    attempt("conv3x3_fwd_bwd_32x64x32x32", "jax.jit",
            lambda: report("conv3x3_fwd_bwd_32x64x32x32", "jax.jit",
                           median_us(lambda: jax.block_until_ready(fwd_bwd(x, k)))))
    attempt("maxpool2x2_32x64x32x32", "jax.jit",
            lambda: report("maxpool2x2_32x64x32x32", "jax.jit",
                           median_us(lambda: pool(x).block_until_ready())))

    images, labels = jnp.asarray(IMAGES), jnp.asarray(LABELS.astype(np.int32))
    batches = [jnp.asarray(b.astype(np.int32)) for b in BATCHES]
    cdn = ("NHWC", "HWIO", "NHWC")

    def block(a, w, b):
        y = jax.nn.relu(lax.conv_general_dilated(a, w, (1, 1), "SAME", dimension_numbers=cdn) + b)
        return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")

    def dropout(key, h):
        keep = jax.random.bernoulli(key, 1 - DROP, h.shape)
        return jnp.where(keep, h / (1 - DROP), 0)

    def forward(ps, xb, key):
        k1, k2 = jax.random.split(key)
        h = block(block(xb, ps[0], ps[1]), ps[2], ps[3]).reshape(xb.shape[0], -1)
        h = jax.nn.relu(dropout(k1, h) @ ps[4] + ps[5])
        return dropout(k2, h) @ ps[6] + ps[7]

    def loss_of(ps, xb, yb, key):
        logp = jax.nn.log_softmax(forward(ps, xb, key))
        return -jnp.mean(jnp.take_along_axis(logp, yb[:, None], 1))

    def step(ps, m, v, count, idx, key):
        xb, yb = images[idx], labels[idx]
        loss, g = jax.value_and_grad(loss_of)(ps, xb, yb, jax.random.fold_in(key, count))
        c = (count + 1).astype(jnp.float32)
        lr = LR * 0.5 * (1 + jnp.cos(jnp.pi * jnp.minimum(count, TOTAL) / TOTAL))
        c1, c2 = 1 - 0.9 ** c, 1 - 0.999 ** c
        m = [mi * 0.9 + gi * 0.1 for mi, gi in zip(m, g)]
        v = [vi * 0.999 + gi * gi * 0.001 for vi, gi in zip(v, g)]
        ps = [p - lr * ((mi / c1) / (jnp.sqrt(vi / c2) + 1e-8) + p * WD)
              for p, mi, vi in zip(ps, m, v)]
        return loss, ps, m, v, count + 1

    # donate_argnums: parameters and AdamW state updated in place, as rune's consumed arguments.
    step = jax.jit(step, donate_argnums=(0, 1, 2))
    params = [jnp.asarray(p) for p in CNN]
    state = [params, [jnp.zeros_like(p) for p in params], [jnp.zeros_like(p) for p in params],
             jnp.int32(0)]
    key = jax.random.PRNGKey(1234)
    i = [0]

    def once():
        loss, state[0], state[1], state[2], state[3] = step(*state, batches[i[0] % len(batches)], key)
        i[0] += 1
        return float(loss)

    attempt("cnn_train_step_b128", "jax.jit",
            lambda: report("cnn_train_step_b128", "jax.jit", median_us(once, warmup=3)))


def main():
    workloads = ("conv3x3_fwd_32x64x32x32", "conv3x3_fwd_bwd_32x64x32x32", "maxpool2x2_32x64x32x32",
                 "cnn_train_step_b128")
    for name, fn in (("torch", torch_benches), ("jax.jit", jax_benches)):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            for w in workloads:
                skip(w, name, e)
    print(json.dumps({"bench": "compare_conv", "python": sys.version.split()[0], "threads": THREADS,
                      "results": results}))


if __name__ == "__main__":
    main()
