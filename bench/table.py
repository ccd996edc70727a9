"""Combines one bench/run's outputs into one table and the same as JSON.

Usage: table.py OUT_DIR [JSON_PATH]

OUT_DIR holds each benchmark's stdout as <step>.txt (bench/run writes them); the last line of a
file that starts with '{' is its JSON: bench::Report's format for rune's side (rune_us, the C++
reference and its time, goals), compare.py's format for the other systems. Only numbers measured
in this run appear; a missing or unreadable file only drops its rows, with a note.

Columns: rune's time; for each reference its time and rune/ref (below 1: rune faster); rune's
fraction of the machine's limit, from this run's STREAM and FMA measurements (bench_rows):
bandwidth-bound workloads: (least bytes the workload must move / best of STREAM copy and triad
bandwidth) / rune's time; matrix products: rune's GFLOP/s / FMA peak; then the goals.
"""

import json
import os
import sys
import time

RUNE_STEPS = ["rows", "eager", "jit", "matmul", "mlp", "train", "first_call", "first_step", "math", "donation", "control_flow", "launch", "gpt", "conv", "data", "attention", "attention_unfused"]
# first_step prints rune's rows and the references' in one list (bench/first_step.py).
COMPARE_STEPS = ["compare", "train_compare", "gpt_compare", "conv_compare", "attention_compare", "first_step"]
SYSTEMS = ["numpy", "torch", "torch.compile", "jax.jit", "mx.compile", "tinygrad"]
BIG = 1 << 24
ROWS = 4096 * 1024
# Least bytes each bandwidth-bound workload must move: every input read once, output written once.
BYTES = {
    "jit_affine_16M_f32": 8 * BIG, "jit_affine_16M_f64": 16 * BIG, "eager_affine_16M": 8 * BIG,
    "eager_one_op_16M": 8 * BIG, "jit_chain_16M": 8 * BIG, "sum_16M": 4 * BIG, "mean_16M": 4 * BIG,
    "softmax_4096x1024": 8 * ROWS, "layernorm_4096x1024": 8 * ROWS,
}
# Floating-point operations of the compute-bound workloads (a multiply-add is 2).
MLP_FLOPS = 2 * 128 * (784 * 256 + 256 * 10) * 3 - 2 * 128 * 784 * 256  # fwd + dW1, dW2, dh
CONV_FLOPS = 2 * 32 * 64 * 32 * 32 * 64 * 9  # 3x3 conv, 32 x 64 x 32 x 32, 64 outputs: forward
FLOPS = {"matmul_256": 2 * 256**3, "matmul_1024": 2 * 1024**3, "matmul_bias_relu_1024": 2 * 1024**3,
         "train_mlp_step": MLP_FLOPS, "conv3x3_fwd_32x64x32x32": CONV_FLOPS,
         "conv3x3_fwd_bwd_32x64x32x32": 3 * CONV_FLOPS}
ORDER = ["jit_affine_16M_f32", "jit_affine_16M_f64", "eager_affine_16M", "eager_one_op_16M",
         "jit_chain_16M", "sum_16M", "mean_16M", "softmax_4096x1024", "layernorm_4096x1024",
         "matmul_256", "matmul_1024", "matmul_bias_relu_1024", "train_chapter_step", "train_mlp_step",
         "readme_mlp_step", "conv3x3_fwd_32x64x32x32", "conv3x3_fwd_bwd_32x64x32x32",
         "maxpool2x2_32x64x32x32", "cnn_train_step_b128", "sdpa_causal_fwd_b8h8t128d64",
         "sdpa_causal_fwd_bwd_b8h8t128d64", "sdpa_causal_fwd_b8h8t1024d64",
         "sdpa_causal_fwd_bwd_b8h8t1024d64", "sdpa_causal_fwd_b8h8t128d64_unfused",
         "sdpa_causal_fwd_bwd_b8h8t128d64_unfused", "sdpa_causal_fwd_b8h8t1024d64_unfused",
         "sdpa_causal_fwd_bwd_b8h8t1024d64_unfused", "gpt_step", "scan_1000_steps", "scan_grad_100_first_call", "scan_grad_100_steps", "linreg_100_steps", "jit_call_3", "eager_op_3", "first_call_process_cold", "first_call_process_warm",
         "first_step_readme_mlp", "first_step_mlp784_adamw", "first_step_gpt"]


def load(path):
    try:
        with open(path) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("{")]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def fmt(us):
    if us is None:
        return "-"
    if us < 1:
        return f"{us * 1e3:.0f} ns"
    if us < 1000:
        return f"{us:.3g} us"
    if us < 1e6:
        return f"{us / 1e3:.3g} ms"
    return f"{us / 1e6:.3g} s"


def num(notes, key):
    try:
        return float(notes.get(key, ""))
    except ValueError:
        return None


def build(out_dir):
    notes, machine, rows = [], {}, {}
    for step in RUNE_STEPS:
        d = load(os.path.join(out_dir, f"{step}.txt"))
        if d is None:
            if os.path.exists(os.path.join(out_dir, f"{step}.err")) or step in ("rows", "jit", "mlp"):
                notes.append(f"{step}: no results (see {step}.txt / {step}.err)")
            continue
        n = d.get("notes", {})
        for key in ("copy_GBps", "triad_GBps", "fma_peak_GFLOPs", "threads"):
            if (v := num(n, "machine_" + key)) is not None:
                machine[key] = v
        for k, v in n.items():
            if k.startswith("machine_"):
                continue
            if (k.endswith("_check") or k.startswith(("train_mlp_step_loss", "gpt_step_"))
                    or k in ("blas_missing", "first_call_output")):
                notes.append(f"{k}: {v}")
        for r in d["results"]:
            row = rows.setdefault(r["name"], {"workload": r["name"], "refs": {}, "goals": []})
            if "skipped" in r:
                row["skipped"] = r["skipped"]
            elif "rune_us" in r:
                row["rune_us"] = r["rune_us"]
            if r.get("ref"):
                row["refs"]["c++ " + r["ref"]] = {"us": r["ref_us"]}
                row["cpp_ref"] = r["ref"]
            if "goal" in r:
                goal = r["goal"].replace("ref", r.get("ref", "ref"))
                met = None if "skipped" in r else r.get("met")
                row["goals"].append({"goal": goal, "met": met})
    for step in COMPARE_STEPS:
        d = load(os.path.join(out_dir, f"{step}.txt"))
        if d is None:
            notes.append(f"{step}: no results (see {step}.txt / {step}.err)")
            continue
        for c in d["results"]:
            if "framework" not in c:
                continue  # a rune row (first_step)
            targets = [c["name"]] if c["name"] != "*" else list(rows)
            for name in targets:
                row = rows.setdefault(name, {"workload": name, "refs": {}, "goals": []})
                if "skipped" in c:
                    row["refs"][c["framework"]] = {"skipped": c["skipped"]}
                else:
                    row["refs"][c["framework"]] = {"us": c["us"], **({"note": c["note"]} if "note" in c else {})}
    bw = max([machine.get("copy_GBps", 0), machine.get("triad_GBps", 0)]) or None
    peak = machine.get("fma_peak_GFLOPs")
    for name, row in rows.items():
        rune = row.get("rune_us")
        for ref in row["refs"].values():
            if rune and "us" in ref:
                ref["ratio"] = rune / ref["us"]
        if rune and name in BYTES and bw:
            row["limit"] = {"kind": "bandwidth", "fraction": BYTES[name] / (bw * 1e3) / rune}
        elif rune and name in FLOPS and peak:
            row["limit"] = {"kind": "fma_peak", "fraction": FLOPS[name] / (peak * 1e3) / rune}
        # Goals decided across systems (the per-workload ones came with rune's results).
        refs = row["refs"]

        def cross(goal, system, factor):
            r = refs.get(system, {})
            met = None if not rune or "us" not in r else rune * factor <= r["us"]
            row["goals"].append({"goal": goal, "met": met})

        if name == "jit_chain_16M":
            cross("10x faster than numpy", "numpy", 10)
        if name in ("sum_16M", "mean_16M"):
            cross("rune/torch <= 1.2x", "torch", 1 / 1.2)
        if name == "train_mlp_step":
            cross("faster than torch.compile", "torch.compile", 1)
            cross("faster than jax.jit", "jax.jit", 1)
        if name == "readme_mlp_step":  # issue 22: under 20 us and ahead of jax.jit
            cross("faster than jax.jit", "jax.jit", 1)
        if name.startswith("first_step_"):  # issue 42: ahead of jax.jit's first step
            cross("faster than jax.jit", "jax.jit", 1)
        if name == "gpt_step":  # issue 18: ahead of all three on the GPT step
            cross("faster than torch", "torch", 1)
            cross("faster than torch.compile", "torch.compile", 1)
            cross("faster than jax.jit", "jax.jit", 1)
    ordered = [rows[n] for n in ORDER if n in rows] + [r for n, r in rows.items() if n not in ORDER]
    # Scale references (a cache-hit call, one eager op, a plain copy) are not systems to beat.
    scale = ("c++ steady_call", "c++ eager_op", "c++ copy")
    behind = [f"{r['workload']}: {sysname} {fmt(ref['us'])} vs rune {fmt(r['rune_us'])} ({ref['ratio']:.2f}x)"
              for r in ordered for sysname, ref in r["refs"].items()
              if ref.get("ratio", 0) > 1 and sysname not in scale]
    skipped = sorted({f"{s}: {ref['skipped']}" for r in ordered for s, ref in r["refs"].items()
                      if "skipped" in ref})
    return {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": os.cpu_count(),
            "threads": int(machine.get("threads", 0)) or None,
            "load_average": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None,
            "machine": machine, "rows": ordered, "behind": behind, "skipped": skipped, "notes": notes}


def cell(ref):
    if ref is None:
        return "-"
    if "skipped" in ref:
        return "skip"
    s = fmt(ref["us"])
    return s + (f" ({ref['ratio']:.2f}x)" if "ratio" in ref else "")


def render(res):
    m = res["machine"]
    lines = [f"rune vs references, {res['date']}: {res['cores']} cores; every system limited to "
             f"{res['threads'] or 2} threads (rune RUNE_NUM_THREADS, C++ loops, BLAS, torch.set_num_threads, "
             f"OMP/MKL/OpenBLAS variables, taskset for XLA and MLX); load average {' '.join(res['load_average'] or [])}",
             f"machine limits measured in this run: STREAM copy {m.get('copy_GBps', '-')} GB/s, "
             f"triad {m.get('triad_GBps', '-')} GB/s, FMA peak {m.get('fma_peak_GFLOPs', '-')} GFLOP/s",
             "cells: median time (rune/ref; below 1 = rune faster); c++ ref = hand-written loop "
             "(-O3 -march=native, no fast-math) or BLAS, timed in turn with rune", ""]
    head = ["workload", "rune", "c++ ref", *SYSTEMS, "% of limit", "goals"]
    table = []
    for r in res["rows"]:
        cpp = next(((k, v) for k, v in r["refs"].items() if k.startswith("c++ ")), None)
        lim = r.get("limit")
        limit = (f"{100 * lim['fraction']:.0f}% {'BW' if lim['kind'] == 'bandwidth' else 'FMA'}") if lim else "-"
        goals = "; ".join(f"{g['goal']}: {'MET' if g['met'] else 'not measured' if g['met'] is None else 'NOT MET'}"
                          for g in r["goals"])
        rune = "skipped" if "skipped" in r and "rune_us" not in r else fmt(r.get("rune_us"))
        table.append([r["workload"], rune, (cpp[0][4:] + " " + cell(cpp[1])) if cpp else "-",
                      *[cell(r["refs"].get(s)) for s in SYSTEMS], limit, goals])
    widths = [max(len(str(x[i])) for x in table + [head]) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    lines += [line(head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(t) for t in table]
    goals = [(r["workload"], g) for r in res["rows"] for g in r["goals"]]
    met = sum(1 for _, g in goals if g["met"])
    lines += ["", f"goals met: {met} of {len(goals)}"]
    lines += [f"  NOT MET: {w}: {g['goal']}" for w, g in goals if g["met"] is False]
    lines += [f"  not measured: {w}: {g['goal']}" for w, g in goals if g["met"] is None]
    lines += ["", "rune behind a reference (goal: ahead of every reference system):"]
    lines += [f"  {b}" for b in res["behind"]] or ["  none"]
    if res["skipped"]:
        lines += ["", "skipped:"] + [f"  {s}" for s in res["skipped"]]
    for r in res["rows"]:
        if "skipped" in r:
            lines.append(f"  {r['workload']}: rune skipped: {r['skipped']}")
    if res["notes"]:
        lines += ["", "checks and notes:"] + [f"  {n}" for n in res["notes"]]
    return "\n".join(lines)


def main():
    res = build(sys.argv[1])
    text = render(res)
    res["table"] = text
    print(text)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
