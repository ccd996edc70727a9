"""The first step of a model in a fresh process with a cold cache: rune against jax.jit and
torch.compile on the same models, measured in the same run (docs/performance.md "The first step").

Each run is a new process. Timed inside it, from the first line of the model's code (after the
interpreter and the libraries are loaded, so Python's and jax's imports are not counted, nor
rune's process start) to the first step's loss read back: the eager set-up of the parameters and
data, then the trace, compile and run of the first compiled training step.
  rune:          build/bench/first_step <model> (samples/gpt --first-step for gpt), each run with a
                 fresh empty RUNE_CACHE_DIR; the process's wall time from spawn to exit is shown too
  jax.jit:       this script with --ref (jax's persistent compilation cache is off by default)
  torch.compile: this script with --ref, TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR fresh per run
Models: readme_mlp (bench_train's readme_mlp_step: 2-64-2 tanh MLP, 400 points, cross-entropy,
SGD), mlp784_adamw (bench/mlp_784_step.h's 784-256-10 tanh MLP, batch 128, mean squared error,
AdamW 1e-3) and gpt (samples/gpt.cpp's step, bench/compare_gpt.py's models with --first-step).
Prints one line per model with the medians and ratios (rune / reference: below 1, rune is
faster) and a final JSON line (rune's rows in bench::Report's format, the references' in
compare.py's) for bench/run.

Usage: first_step.py BUILD_DIR TEXT [RUNS] [--models a,b] [--no-refs]
       first_step.py --ref FRAMEWORK MODEL   (one reference run; prints "setup_us S step_us T")
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

THREADS = int(os.environ.get("RUNE_NUM_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = str(THREADS)
HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["readme_mlp", "mlp784_adamw", "gpt"]
GOALS = {"readme_mlp": 150e3}  # issue 42: the README MLP's cold first step under 150 ms


# ---- the references (run in a child: first_step.py --ref FRAMEWORK MODEL) ----

def torch_ref(model):
    import torch
    from torch.func import grad_and_value

    torch.set_num_threads(THREADS)
    t0 = time.perf_counter()
    g = torch.Generator().manual_seed(0)
    if model == "readme_mlp":
        x = torch.randn(400, 2, generator=g)
        y = torch.nn.functional.one_hot(torch.arange(400) % 2, 2).float()
        ps = (torch.randn(2, 64, generator=g) * 0.5 ** 0.5, torch.zeros(64),
              torch.randn(64, 2, generator=g) * (1 / 64) ** 0.5, torch.zeros(2))

        def loss_fn(p):
            logits = torch.tanh(x @ p[0] + p[1]) @ p[2] + p[3]
            return -(y * torch.log_softmax(logits, 1)).sum(1).mean()

        def step(p):
            grads, loss = grad_and_value(loss_fn)(p)
            return loss, tuple(q - gr for q, gr in zip(p, grads))

        args = (ps,)
    else:
        ps = (torch.randn(784, 256, generator=g) * 0.05, torch.randn(256, 10, generator=g) * 0.05)
        xb, yb = torch.rand(128, 784, generator=g), torch.rand(128, 10, generator=g)
        ms = tuple(torch.zeros_like(p) for p in ps)
        vs = tuple(torch.zeros_like(p) for p in ps)
        count = torch.zeros((), dtype=torch.int64)

        def loss_fn(p):
            d = torch.tanh(xb @ p[0]) @ p[1] - yb
            return (d * d).mean()

        def step(p, m, v, n):  # AdamW written out (torch.optim.AdamW's defaults, lr 1e-3)
            grads, loss = grad_and_value(loss_fn)(p)
            n = n + 1
            c1, c2 = 1 - 0.9 ** n.double(), 1 - 0.999 ** n.double()
            m = tuple(0.9 * a + 0.1 * gr for a, gr in zip(m, grads))
            v = tuple(0.999 * a + 0.001 * gr * gr for a, gr in zip(v, grads))
            p = tuple(q - 1e-3 * ((a / c1) / (torch.sqrt(b / c2) + 1e-8) + 0.01 * q)
                      for q, a, b in zip(p, m, v))
            return loss, p, m, v, n

        args = (ps, ms, vs, count)
    out = torch.compile(step)(*args)
    loss = float(out[0])
    return t0, loss


def jax_ref(model):
    import jax
    import jax.numpy as jnp

    t0 = time.perf_counter()
    if model == "readme_mlp":
        k = jax.random.split(jax.random.PRNGKey(7), 3)
        x = jax.random.normal(k[0], (400, 2), dtype=jnp.float32)
        y = jax.nn.one_hot(jnp.arange(400) % 2, 2, dtype=jnp.float32)
        ps = [jax.random.normal(k[1], (2, 64), dtype=jnp.float32) * 0.5 ** 0.5, jnp.zeros(64, jnp.float32),
              jax.random.normal(k[2], (64, 2), dtype=jnp.float32) * (1 / 64) ** 0.5, jnp.zeros(2, jnp.float32)]

        def loss_fn(p):
            logits = jnp.tanh(x @ p[0] + p[1]) @ p[2] + p[3]
            return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, 1), 1))

        @jax.jit
        def step(p):
            loss, g = jax.value_and_grad(loss_fn)(p)
            return loss, [q - gr for q, gr in zip(p, g)]

        args = (ps,)
    else:
        k = jax.random.split(jax.random.PRNGKey(1), 4)
        ps = [jax.random.normal(k[0], (784, 256), dtype=jnp.float32) * 0.05,
              jax.random.normal(k[1], (256, 10), dtype=jnp.float32) * 0.05]
        xb = jax.random.uniform(k[2], (128, 784), dtype=jnp.float32)
        yb = jax.random.uniform(k[3], (128, 10), dtype=jnp.float32)
        ms = [jnp.zeros_like(p) for p in ps]
        vs = [jnp.zeros_like(p) for p in ps]

        def loss_fn(p):
            d = jnp.tanh(xb @ p[0]) @ p[1] - yb
            return jnp.mean(d * d)

        @jax.jit
        def step(p, m, v, n):  # optax.adamw(1e-3)'s update written out
            loss, g = jax.value_and_grad(loss_fn)(p)
            n = n + 1
            c1, c2 = 1 - 0.9 ** n, 1 - 0.999 ** n
            m = [0.9 * a + 0.1 * gr for a, gr in zip(m, g)]
            v = [0.999 * a + 0.001 * gr * gr for a, gr in zip(v, g)]
            p = [q - 1e-3 * ((a / c1) / (jnp.sqrt(b / c2) + 1e-8) + 0.01 * q) for q, a, b in zip(p, m, v)]
            return loss, p, m, v, n

        args = (ps, ms, vs, jnp.zeros((), jnp.int32))
    out = step(*args)
    loss = float(out[0])
    return t0, loss


def reference_child(framework, model):
    t0, loss = (torch_ref if framework == "torch.compile" else jax_ref)(model)
    print(f"setup_us 0 step_us {(time.perf_counter() - t0) * 1e6:.0f} loss {loss:.6f}", flush=True)


# ---- the driver ----

def run(cmd, env, timeout):
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    wall_us = (time.perf_counter() - t) * 1e6
    if p.returncode != 0:
        raise RuntimeError(f"exit status {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}")
    m = re.search(r"setup_us (\d+) step_us (\d+) loss (\S+)", p.stdout)
    if not m:
        raise RuntimeError(f"no timing line in: {p.stdout.strip()[-200:]}")
    return int(m.group(1)) + int(m.group(2)), int(m.group(1)), wall_us, m.group(3)


def main():
    if sys.argv[1] == "--ref":
        reference_child(sys.argv[2], sys.argv[3])
        return
    argv, models, refs = [], MODELS, True
    it = iter(sys.argv[1:])
    for a in it:
        if a == "--models":
            models = next(it).split(",")
        elif a == "--no-refs":
            refs = False
        else:
            argv.append(a)
    build, text = argv[0], argv[1]
    runs = int(argv[2]) if len(argv) > 2 else 5
    py = os.path.join(HERE, ".venv", "bin", "python")
    if not os.path.exists(py):
        py = sys.executable
    results, notes = [], {}
    root = tempfile.mkdtemp(prefix="rune-first-step-")
    try:
        for model in models:
            name = f"first_step_{model}"
            rune_cmd = ([os.path.join(build, "samples", "gpt"), "--first-step", "--data", text]
                        if model == "gpt" else [os.path.join(build, "bench", "first_step"), model])
            n = runs if model != "gpt" else max(1, min(runs, 3))
            line = f"{name}:"
            try:
                totals, setups, walls = [], [], []
                for i in range(n):
                    d = os.path.join(root, f"rune-{model}-{i}")
                    os.makedirs(d)
                    total, setup, wall, loss = run(rune_cmd, dict(os.environ, RUNE_CACHE_DIR=d), 900)
                    totals.append(total)
                    setups.append(setup)
                    walls.append(wall)
                rune_us = statistics.median(totals)
                entry = {"name": name, "rune_us": rune_us}
                if model in GOALS:
                    entry.update(goal=f"rune < {GOALS[model]:g} us", met=rune_us < GOALS[model])
                results.append(entry)
                notes[f"{name}_loss"] = loss
                line += (f" rune {rune_us / 1e3:.0f} ms (set-up {statistics.median(setups) / 1e3:.0f} ms;"
                         f" process {statistics.median(walls) / 1e3:.0f} ms; median of {n}:"
                         f" {', '.join(f'{t / 1e3:.0f}' for t in totals)})")
            except Exception as e:  # noqa: BLE001
                rune_us = None
                reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                results.append({"name": name, "skipped": reason})
                line += f" rune skipped: {reason}"
            for framework in (("jax.jit", "torch.compile") if refs else ()):
                try:
                    times = []
                    for i in range(n):
                        env = dict(os.environ)
                        d = os.path.join(root, f"{framework}-{model}-{i}")
                        env.update(TORCHINDUCTOR_CACHE_DIR=d + "/inductor", TRITON_CACHE_DIR=d + "/triton")
                        if model == "gpt":
                            cmd = [py, os.path.join(HERE, "compare_gpt.py"), text, "--first-step",
                                   "--framework", framework]
                        else:
                            cmd = [py, os.path.abspath(__file__), "--ref", framework, model]
                        times.append(run(cmd, env, 900)[0])
                    us = statistics.median(times)
                    results.append({"name": name, "framework": framework, "us": us})
                    line += f"; {framework} {us / 1e3:.0f} ms"
                    if rune_us:
                        line += f" (rune/{framework} {rune_us / us:.2f}x)"
                except Exception as e:  # noqa: BLE001
                    reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
                    results.append({"name": name, "framework": framework, "skipped": reason})
                    line += f"; {framework} skipped: {reason}"
            print(line, flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"bench": "first_step", "results": results, "notes": notes}))


if __name__ == "__main__":
    main()
