"""First-call latency of a whole rune program: the chapter's training-step sample
(build-bench/samples/training_step) run as a fresh process, wall time from spawn to exit.

cold: each run gets a fresh, empty RUNE_CACHE_DIR, so it traces, compiles (LLVM) and stores its
kernels; warm: every run shares a cache directory filled by one untimed run first, so kernels are
loaded from disk. Each is the median of several runs. The sample's output is checked against
samples/training_step.expected, so a run that computed the wrong thing is not timed as a success.
Goals: cold under 150 ms, warm under 10 ms (issue 42: a warm process loads its kernels with
rune's own object loader and never loads libLLVM, whose relocation alone took most of 18 ms).
Prints a JSON line in bench::Report's format.

Usage: first_call.py SAMPLE_EXE EXPECTED_FILE [RUNS]
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(exe, cache_dir):
    env = dict(os.environ, RUNE_CACHE_DIR=cache_dir)
    t = time.perf_counter()
    p = subprocess.run([exe], env=env, capture_output=True, text=True, timeout=120)
    us = (time.perf_counter() - t) * 1e6
    if p.returncode != 0:
        raise RuntimeError(f"exit status {p.returncode}: {(p.stderr or p.stdout).strip()[:200]}")
    return us, p.stdout


def main():
    exe, expected_path = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    with open(expected_path) as f:
        expected = f.read()
    results, notes = [], {}

    def entry(name, times, goal_us):
        us = statistics.median(times)
        met = us < goal_us
        print(f"{name}: rune {us:.0f} us (median of {len(times)}: "
              f"{', '.join(f'{t / 1e3:.1f}' for t in times)} ms)  [goal rune < {goal_us:g} us: "
              f"{'MET' if met else 'NOT MET'}]", flush=True)
        results.append({"name": name, "rune_us": us, "goal": f"rune < {goal_us:g} us", "met": met})

    root = tempfile.mkdtemp(prefix="rune-first-call-")
    try:
        cold, warm, wrong = [], [], 0
        for i in range(runs):
            d = os.path.join(root, f"cold{i}")
            os.makedirs(d)
            us, out = run_once(exe, d)
            wrong += out != expected
            cold.append(us)
        shared = os.path.join(root, "warm")
        os.makedirs(shared)
        run_once(exe, shared)  # fills the cache, untimed
        for _ in range(runs):
            us, out = run_once(exe, shared)
            wrong += out != expected
            warm.append(us)
        if wrong:
            notes["first_call_output"] = f"{wrong} runs printed something other than the expected output"
        entry("first_call_process_cold", cold, 150e3)
        entry("first_call_process_warm", warm, 10e3)
    except Exception as e:  # noqa: BLE001
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"first_call_process: skipped: {reason}")
        results.append({"name": "first_call_process_cold", "skipped": reason, "goal": "rune < 150000 us"})
        results.append({"name": "first_call_process_warm", "skipped": reason, "goal": "rune < 10000 us"})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"bench": "first_call", "results": results, "notes": notes}))


if __name__ == "__main__":
    main()
