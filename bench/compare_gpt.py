"""The samples/gpt.cpp model and training step in torch (eager and torch.compile) and jax.jit, for
bench/run's tokens-per-second comparison (docs/performance.md "The GPT step").

The same configuration as the sample: bytes as the vocabulary (256), context 128, 4 layers,
4 heads, width 128, MLP 4x with gelu (tanh form, as nx::gelu), pre-layernorm, learned position
embeddings, tied input / output embedding, dropout 0.1, batch 32, AdamW (betas 0.9 / 0.95,
weight decay 0.1 on matrices, eps 1e-8), global-norm clipping at 1.0, linear warmup then
cosine (the sample's model is rune::nn::GPT2: this math). Batches here are windows at random
offsets, the sample's are its loader's shuffled windows: the same shapes and work per step.
Each framework runs `warmup` steps (compiling), then `steps` timed steps; the median of
per-step times over 3 batches of steps gives tokens per second. Prints `gpt: <framework> <tok/s>
tok/s  loss <first> -> <last>` lines and a final JSON line in compare.py's format.

Usage: python compare_gpt.py <text file or directory> [steps] [warmup] [--small] [--cuda]
       [--first-step --framework torch|torch.compile|jax.jit]
--cuda: torch and torch.compile on the GPU (tools/gpu-check, against the sample on CUDA:0); jax.jit
is left out there.
(a directory: its files but *.dat and *.u8, in sorted order, as samples/gpt.cpp reads
/usr/share/games/fortunes)
"""

import json
import math
import os
import statistics
import sys
import time

THREADS = int(os.environ.get("RUNE_NUM_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "XLA_FLAGS"):
    if _v == "XLA_FLAGS":
        os.environ[_v] = os.environ.get(_v, "") + " --xla_cpu_multi_thread_eigen=true"
    else:
        os.environ[_v] = str(THREADS)

import numpy as np  # noqa: E402

# --first-step --framework F (bench/first_step.py): F's first step alone, timed from the model's
# creation to the first loss read back, printed as "setup_us 0 step_us T loss L".
FIRST_STEP = "--first-step" in sys.argv
ONLY = sys.argv[sys.argv.index("--framework") + 1] if "--framework" in sys.argv else None
args = [a for a in sys.argv[1:] if not a.startswith("--") and a != ONLY]
SMALL = "--small" in sys.argv
DEVICE = "cuda" if "--cuda" in sys.argv else "cpu"
TEXT = args[0]
STEPS = int(args[1]) if len(args) > 1 else 20
WARMUP = int(args[2]) if len(args) > 2 else 3
if SMALL:
    V, T, L, H, C, B = 256, 32, 1, 2, 32, 4
else:
    V, T, L, H, C, B = 256, 128, 4, 4, 128, 32
LR, WARM, TOTAL, WD, CLIP, DROP = 1e-3, 100, 5000, 0.1, 1.0, 0.1

if os.path.isdir(TEXT):
    names = sorted(n for n in os.listdir(TEXT)
                   if not n.startswith(".") and not n.endswith((".dat", ".u8")))
    raw = b"".join(open(os.path.join(TEXT, n), "rb").read() for n in names)
else:
    raw = open(TEXT, "rb").read()
data = np.frombuffer(raw, dtype=np.uint8).astype(np.int64)
rng = np.random.default_rng(0)


def batch():
    ix = rng.integers(0, len(data) - T - 1, B)
    x = np.stack([data[i : i + T] for i in ix])
    y = np.stack([data[i + 1 : i + T + 1] for i in ix])
    return x, y


def lr_at(step):
    if step < WARM:
        return LR * step / WARM
    t = min(step - WARM, TOTAL - WARM) / (TOTAL - WARM)
    return LR * 0.5 * (1 + math.cos(math.pi * t))


results = []


def report(framework, per_step_s, losses, note=None):
    tps = B * T / per_step_s
    where = " on cuda" if DEVICE == "cuda" else ""
    print(f"gpt: {framework}{where} {tps:.0f} tok/s  loss {losses[0]:.3f} -> {losses[-1]:.3f}"
          + (f"  ({note})" if note else ""), flush=True)
    results.append({"name": "gpt_step", "framework": framework, "us": per_step_s * 1e6,
                    "tokens_per_s": tps})


def timed(step_fn):
    if FIRST_STEP:
        loss = step_fn()
        print(f"setup_us 0 step_us {(time.perf_counter() - START) * 1e6:.0f} loss {loss:.6f}", flush=True)
        sys.exit(0)
    losses = []
    for _ in range(WARMUP):
        losses.append(step_fn())
    times = []
    per = max(1, STEPS // 3)
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(per):
            losses.append(step_fn())
        times.append((time.perf_counter() - t) / per)
    return statistics.median(times), losses


def run_torch(compiled):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(THREADS)
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
            self.drop = nn.Dropout(DROP)
            self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // H))
            att = att.masked_fill(~self.mask[:t, :t], float("-inf"))
            att = self.drop(F.softmax(att, dim=-1))
            y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.drop(self.proj(y))
            return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f, self.drop = nn.LayerNorm(C), nn.Dropout(DROP)

        def forward(self, idx, targets):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for blk in self.blocks:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, V), targets.view(-1))

    model = GPT().to(DEVICE)
    # GPT-2's initialisation, as the sample: N(0, 0.02), residual projections / sqrt(2 layers).
    for name, prm in model.named_parameters():
        if prm.dim() >= 2:
            std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "out.weight")) else 0.02
            torch.nn.init.normal_(prm, 0.0, std)
        elif name.endswith("bias"):
            torch.nn.init.zeros_(prm)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD},
                             {"params": other, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    fwd = torch.compile(model) if compiled else model
    state = {"step": 0}

    def step():
        x, y = batch()
        for g in opt.param_groups:
            g["lr"] = lr_at(state["step"])
        loss = fwd(torch.from_numpy(x).to(DEVICE), torch.from_numpy(y).to(DEVICE))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        state["step"] += 1
        return loss.item()

    return timed(step)


def run_jax():
    import jax
    import jax.numpy as jnp

    def init(key):
        ks = iter(jax.random.split(key, 4 + 8 * L))
        n = lambda shape, s=0.02: jax.random.normal(next(ks), shape) * s  # noqa: E731
        p = {"wte": n((V, C)), "wpe": n((T, C)), "lnf": (jnp.ones(C), jnp.zeros(C)), "blocks": []}
        for _ in range(L):
            p["blocks"].append({
                "ln1": (jnp.ones(C), jnp.zeros(C)), "ln2": (jnp.ones(C), jnp.zeros(C)),
                "qkv": (n((C, 3 * C)), jnp.zeros(3 * C)),
                "proj": (n((C, C), 0.02 / math.sqrt(2 * L)), jnp.zeros(C)),
                "fc": (n((C, 4 * C)), jnp.zeros(4 * C)),
                "out": (n((4 * C, C), 0.02 / math.sqrt(2 * L)), jnp.zeros(C))})
        return p

    def ln(x, gb):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * gb[0] + gb[1]

    def drop(key, x):
        keep = jax.random.bernoulli(key, 1 - DROP, x.shape)
        return jnp.where(keep, x / (1 - DROP), 0)

    mask = jnp.tril(jnp.ones((T, T), bool))

    def loss_fn(p, x, y, key):
        keys = iter(jax.random.split(key, 1 + 3 * L))
        h = drop(next(keys), p["wte"][x] + p["wpe"][: x.shape[1]])
        for blk in p["blocks"]:
            qkv = ln(h, blk["ln1"]) @ blk["qkv"][0] + blk["qkv"][1]
            q, k, v = jnp.split(qkv, 3, axis=-1)
            sh = lambda z: z.reshape(B, T, H, C // H).transpose(0, 2, 1, 3)  # noqa: E731
            q, k, v = sh(q), sh(k), sh(v)
            att = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(C // H)
            att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
            y_ = (drop(next(keys), att) @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
            h = h + drop(next(keys), y_ @ blk["proj"][0] + blk["proj"][1])
            m = jax.nn.gelu(ln(h, blk["ln2"]) @ blk["fc"][0] + blk["fc"][1], approximate=True)
            h = h + drop(next(keys), m @ blk["out"][0] + blk["out"][1])
        logits = ln(h, p["lnf"]) @ p["wte"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, y[..., None], axis=-1).mean()

    def adamw(p, g, m, v, t, lr):
        leaves_p, tree = jax.tree_util.tree_flatten(p)
        gl, ml, vl = (jax.tree_util.tree_leaves(z) for z in (g, m, v))
        norm = jnp.sqrt(sum(jnp.sum(z * z) for z in gl))
        scale = jnp.where(norm < CLIP, 1.0, CLIP / norm)
        out_p, out_m, out_v = [], [], []
        for pp, gg, mm, vv in zip(leaves_p, gl, ml, vl):
            gg = gg * scale
            mm = 0.9 * mm + 0.1 * gg
            vv = 0.95 * vv + 0.05 * gg * gg
            u = (mm / (1 - 0.9 ** t)) / (jnp.sqrt(vv / (1 - 0.95 ** t)) + 1e-8)
            if pp.ndim >= 2:
                u = u + WD * pp
            out_p.append(pp - lr * u)
            out_m.append(mm)
            out_v.append(vv)
        unf = lambda z: jax.tree_util.tree_unflatten(tree, z)  # noqa: E731
        return unf(out_p), unf(out_m), unf(out_v)

    @jax.jit
    def train_step(p, m, v, x, y, key, t, lr):
        loss, g = jax.value_and_grad(loss_fn)(p, x, y, key)
        p, m, v = adamw(p, g, m, v, t, lr)
        return loss, p, m, v

    p = init(jax.random.key(0))
    m = jax.tree_util.tree_map(jnp.zeros_like, p)
    v = jax.tree_util.tree_map(jnp.zeros_like, p)
    state = {"p": p, "m": m, "v": v, "step": 0, "key": jax.random.key(1)}

    def step():
        x, y = batch()
        s = state
        s["key"], sub = jax.random.split(s["key"])
        loss, s["p"], s["m"], s["v"] = train_step(s["p"], s["m"], s["v"], x, y, sub,
                                                  s["step"] + 1, lr_at(s["step"]))
        s["step"] += 1
        return float(loss)

    return timed(step)


frameworks = [("torch", lambda: run_torch(False)), ("torch.compile", lambda: run_torch(True))]
if DEVICE == "cpu":
    frameworks.append(("jax.jit", run_jax))
for name, fn in frameworks:
    if ONLY and name != ONLY:
        continue
    START = time.perf_counter()
    try:
        per, losses = fn()
        report(name, per, losses)
    except Exception as e:  # noqa: BLE001
        print(f"gpt: {name} skipped ({type(e).__name__}: {str(e).splitlines()[0][:120]})", flush=True)
        results.append({"name": "gpt_step", "framework": name, "skipped": str(e)[:200]})

print(json.dumps({"bench": "compare_gpt", "results": results}))
