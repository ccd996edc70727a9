#!/usr/bin/env python3
"""Every test of a build has a label, a timeout and a private RUNE_CACHE_DIR, and no two tests
share a name (a test file compiled into two binaries runs its tests twice under one name).

Usage: check_test_properties.py <ctest> <build dir> [<shared test kernel cache>]. Reads
`ctest --show-only=json-v1` (the tests as ctest will run them, gtest-discovered ones included)
and prints every offender. A RUNE_CACHE_DIR counts as private when it is inside the build tree,
or inside the test kernel cache the build was configured to share (RUNE_TEST_KERNEL_CACHE:
tools/test gives its ASan stage the release stage's)."""
import collections
import json
import os
import subprocess
import sys
import tempfile


def main():
    ctest, build = sys.argv[1], os.path.realpath(sys.argv[2])
    private = [build]
    if len(sys.argv) > 3 and sys.argv[3]:
        private.append(os.path.realpath(sys.argv[3]))
    # Listed from a scratch directory whose CTestTestfile includes the build's: ctest writes
    # Testing/Temporary/LastTest.log wherever it runs, and this runs inside the build's own
    # ctest run, whose log it would replace.
    with tempfile.TemporaryDirectory() as scratch:
        with open(os.path.join(scratch, "CTestTestfile.cmake"), "w") as f:
            f.write(f'subdirs("{build}")\n')
        out = subprocess.run([ctest, "--show-only=json-v1"], cwd=scratch, check=True,
                             capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    problems = []
    names = collections.Counter(t["name"] for t in tests)
    for name, n in sorted(names.items()):
        if n > 1:
            problems.append(f"{name}: registered {n} times")
    for t in tests:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        why = []
        if not props.get("LABELS"):
            why.append("no label")
        if not props.get("TIMEOUT") or float(props["TIMEOUT"]) <= 0:
            why.append("no timeout")
        cache = [e.split("=", 1)[1] for e in props.get("ENVIRONMENT", [])
                 if e.startswith("RUNE_CACHE_DIR=")]
        # The last assignment wins; it must name a directory inside the build tree (or be the
        # shared test kernel cache).
        where = os.path.realpath(cache[-1]) if cache else ""
        if not cache or not any(where == d or where.startswith(d + os.sep) for d in private):
            why.append("no RUNE_CACHE_DIR inside the build tree"
                       + (f" (has {cache[-1]!r})" if cache else ""))
        if why:
            problems.append(f"{t['name']}: " + ", ".join(why))
    if len(tests) < 2:
        problems.append(f"only {len(tests)} tests found: discovery did not run?")
    for p in problems:
        print(p)
    print(f"{len(tests)} tests, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
