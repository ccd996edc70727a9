"""The results list the comparison scripts (bench/compare_train.py, bench/compare_conv.py) fill and
print as JSON for bench/run: a timing per (workload, framework), or why that framework skipped it.
One framework failing a workload drops only that row."""

results = []


def report(workload, framework, us, note=None, digits=3):
    print(f"{workload}: {framework} {us:.{digits}f} us" + (f"  ({note})" if note else ""), flush=True)
    entry = {"name": workload, "framework": framework, "us": us}
    if note:
        entry["note"] = note
    results.append(entry)


def skip(workload, framework, e):
    text = str(e).strip()
    reason = f"{type(e).__name__}: {text.splitlines()[0][:160]}" if text else type(e).__name__
    print(f"{workload}: {framework} skipped: {reason}", flush=True)
    results.append({"name": workload, "framework": framework, "skipped": reason})


def attempt(workload, framework, thunk):
    try:
        thunk()
    except Exception as e:  # noqa: BLE001
        skip(workload, framework, e)
