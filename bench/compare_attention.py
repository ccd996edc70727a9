"""torch's F.scaled_dot_product_attention on bench_attention's workloads (same shapes, same math),
for bench/run's attention rows (docs/attention.md "Cost").

- sdpa_causal_fwd_b8h8t<T>d64: causal attention of q, k, v [8, 8, T, 64] float32 (is_causal=True,
  scale 1/sqrt(64)), T = 128 and 1024.
- sdpa_causal_fwd_bwd_b8h8t<T>d64: the same forward pass and the gradients of
  sum(attention(q, k, v) * dy) with respect to q, k and v.

torch picks its backend itself (on the CPU in float32: its fused flash-attention kernel,
aten::_scaled_dot_product_flash_attention_for_cpu; the row's note names the op torch's profiler
saw). Its unfused math backend (torch.nn.attention.sdpa_kernel(SDPBackend.MATH), what rune's
composition computes) is measured too and given in the note.

Run with bench/.venv/bin/python; prints `workload: framework X us` lines and a final JSON line in
compare.py's format. torch is held to 2 threads (RUNE_NUM_THREADS). Usage:
compare_attention.py [--only-t T]
"""

import os

THREADS = int(os.environ.get("RUNE_NUM_THREADS", "2"))
for _v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = str(THREADS)

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

from results import attempt, report, results  # noqa: E402  (bench/results.py)

B, H, D = 8, 8, 64
REPS = 7


def median_us(f, reps, warmup=1):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append((time.perf_counter() - t) * 1e6)
    return statistics.median(times)


def torch_rows(ts):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.set_num_threads(THREADS)
    g = torch.Generator().manual_seed(41)
    for t in ts:
        reps = max(3, REPS // 2) if t >= 1024 else REPS
        q, k, v, dy = (torch.randn(B, H, t, D, generator=g) for _ in range(4))
        fwd_name, bwd_name = f"sdpa_causal_fwd_b8h8t{t}d64", f"sdpa_causal_fwd_bwd_b8h8t{t}d64"

        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))

        def fwd_bwd():
            y = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
            torch.autograd.grad((y * dy).sum(), (qg, kg, vg))

        with torch.profiler.profile() as prof:
            fwd()
        ops = [e.key for e in prof.key_averages() if "attention" in e.key and "_scaled" in e.key]
        kernel = ops[-1] if ops else "unknown"
        with sdpa_kernel(SDPBackend.MATH):
            math_fwd = median_us(fwd, reps)
            math_bwd = median_us(fwd_bwd, reps)
        report(fwd_name, "torch", median_us(fwd, reps),
               f"{kernel}; math backend {math_fwd:.0f} us")
        report(bwd_name, "torch", median_us(fwd_bwd, reps),
               f"{kernel} and its backward; math backend {math_bwd:.0f} us")


def main():
    ts = [128, 1024]
    if "--only-t" in sys.argv:
        ts = [int(sys.argv[sys.argv.index("--only-t") + 1])]
    attempt("sdpa_causal_*", "torch", lambda: torch_rows(ts))
    print(json.dumps({"results": results}))


if __name__ == "__main__":
    main()
