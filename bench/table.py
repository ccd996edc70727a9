"""Combines the JSON lines of bench_eager, bench_jit and compare.py into one table.

Usage: table.py EAGER_OUT JIT_OUT [COMPARE_OUT]; each file is a benchmark's stdout, whose last
line starting with '{' is its JSON. A missing or unreadable file only drops its rows.
"""

import json
import sys


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
    if us < 1000:
        return f"{us:.3f} us"
    if us < 1e6:
        return f"{us / 1e3:.2f} ms"
    return f"{us / 1e6:.2f} s"


def main():
    rune = [r for p in sys.argv[1:3] if (d := load(p)) for r in d["results"]]
    comp = (load(sys.argv[3]) or {}).get("results", []) if len(sys.argv) > 3 else []
    rows, notes = [], []
    for r in rune:
        name = r["name"]
        rune_us = r.get("rune_us")
        rune_cell = fmt(rune_us) if "skipped" not in r else "skipped"
        if "skipped" in r:
            notes.append(f"{name}: rune skipped: {r['skipped']}")
        ref = r.get("ref")
        if ref:
            ratio = f"rune/{ref} = {rune_us / r['ref_us']:.2f}x" if rune_us else "-"
            goal = ""
            if "goal" in r:
                status = "not measured" if "skipped" in r else "MET" if r["met"] else "NOT MET"
                goal = f"{r['goal']}: {status}"
            rows.append((name, rune_cell, f"{ref} {fmt(r['ref_us'])}", ratio, goal))
        else:
            rows.append((name, rune_cell, "-", "-", ""))
        # Other frameworks on the same workload, measured in this run.
        for c in comp:
            if c["name"] != name:
                continue
            fw = c["framework"]
            if "skipped" in c:
                rows.append(("", "", f"{fw} skipped", "-", ""))
                notes.append(f"{name}: {fw} skipped: {c['skipped']}")
                continue
            ratio = f"rune/{fw} = {rune_us / c['us']:.2f}x" if rune_us else "-"
            rows.append(("", "", f"{fw} {fmt(c['us'])}", ratio, c.get("note", "")))
    head = ("workload", "rune", "reference", "ratio (below 1: rune faster)", "goal / note")
    widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    print(line(head))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))
    for n in notes:
        print(f"  note: {n}")


if __name__ == "__main__":
    main()
