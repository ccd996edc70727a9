"""bench/run's gpt row: runs samples/gpt (its arguments after this script's), passes its output
through, and turns the line it ends its training with,
  trained N steps in M minutes (median step S ms, R tok/s); loss A -> B (means of K steps): ...
into a last line in bench::Report's JSON format (gpt_step: the median step time after the first
three, which compile). Exits with the sample's status; no JSON line when the sample printed none.

Usage: gpt_step.py GPT_EXE [gpt options...]
"""

import json
import re
import subprocess
import sys


def main():
    p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)
    sys.stdout.buffer.write(p.stdout)  # as printed: a sample may hold any bytes
    sys.stdout.flush()
    out = p.stdout.decode("utf-8", errors="replace")
    m = re.search(r"median step ([0-9.]+) ms, ([0-9]+) tok/s\); loss ([0-9.naif-]+) -> ([0-9.naif-]+)",
                  out)
    if m:
        print(json.dumps({"results": [{"name": "gpt_step", "rune_us": float(m[1]) * 1e3}],
                          "notes": {"gpt_step_tokens_per_s": m[2],
                                    "gpt_step_loss": f"{m[3]} -> {m[4]}"}}))
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
