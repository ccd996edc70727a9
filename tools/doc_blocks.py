#!/usr/bin/env python3
"""Extracts the tested code blocks of a markdown page.

Each ```cpp block immediately followed by an ```out block becomes <outdir>/<stem>_<n>.cpp and
<outdir>/<stem>_<n>.expected; prints the block names, one per line (read by CMake).
"""
import pathlib
import re
import sys

page, outdir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
outdir.mkdir(parents=True, exist_ok=True)
text = page.read_text()
pairs = re.findall(r"```cpp\n(.*?)```\n```out\n(.*?)```", text, re.S)
for n, (code, out) in enumerate(pairs):
    name = f"{page.stem}_{n}"
    for suffix, body in ((".cpp", code), (".expected", out)):
        path = outdir / (name + suffix)
        if not path.exists() or path.read_text() != body:
            path.write_text(body)
    print(name)
