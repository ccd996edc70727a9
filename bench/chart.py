"""Renders bench/run's results JSON as a chart: for every workload, each system's time divided
by rune's (log scale; above 1: rune is faster), one bar per system measured in that run.

Usage: chart.py RESULTS_JSON OUT_PNG (run with bench/.venv/bin/python, which has matplotlib).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = ["c++ ref", "numpy", "torch", "torch.compile", "jax.jit", "mx.compile", "tinygrad"]


def main():
    res = json.load(open(sys.argv[1]))
    rows = [r for r in res["rows"] if r.get("rune_us") and any("us" in v for v in r["refs"].values())]
    fig, ax = plt.subplots(figsize=(12, 0.55 * len(rows) + 1.8))
    height = 0.8 / len(SYSTEMS)
    colors = plt.get_cmap("tab10").colors
    for k, system in enumerate(SYSTEMS):
        ys, xs = [], []
        for i, r in enumerate(rows):
            if system == "c++ ref":
                ref = next((v for name, v in r["refs"].items() if name.startswith("c++ ")), None)
            else:
                ref = r["refs"].get(system)
            if ref and "us" in ref:
                ys.append(i + (k - len(SYSTEMS) / 2 + 0.5) * height)
                xs.append(ref["us"] / r["rune_us"])
        ax.barh(ys, xs, height=height, color=colors[k % len(colors)], label=system)
    ax.axvline(1, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    labels = [r["workload"] for r in rows]
    for i, r in enumerate(rows):
        cpp = next((n[4:] for n in r["refs"] if n.startswith("c++ ")), None)
        if cpp:
            labels[i] += f"\n(c++ ref: {cpp})"
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("reference time / rune time (log scale; right of 1: rune faster)")
    m = res.get("machine", {})
    ax.set_title(f"rune vs references, {res.get('date', '')}, {res.get('threads') or 2} threads each; "
                 f"STREAM {max(m.get('copy_GBps', 0), m.get('triad_GBps', 0)):.3g} GB/s, "
                 f"FMA peak {m.get('fma_peak_GFLOPs', 0):.3g} GFLOP/s", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(axis="x", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
