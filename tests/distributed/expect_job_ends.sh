#!/usr/bin/env bash
# Runs a job that must fail fast: expect_job_ends.sh MAX_SECONDS MESSAGE_REGEX COMMAND...
# Passes only when COMMAND ends within MAX_SECONDS (it is killed after that: a hang fails),
# exits nonzero, and its output (stdout and stderr) matches MESSAGE_REGEX (grep -E) and holds no
# "FAIL:" line (what the fault programs print when a rank saw the wrong thing).
set -u
max=$1 want=$2
shift 2
start=$(date +%s%N)
out=$(timeout -k 5 "$max" "$@" 2>&1)
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
took=$((ms / 1000)).$(printf %03d $((ms % 1000)))
printf '%s\n' "$out"
echo "expect_job_ends: exit status $rc after ${took} s"
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "FAIL: the job did not end within ${max} s (a hang)"
  exit 1
fi
if [ "$rc" -eq 0 ]; then
  echo "FAIL: the job exited 0; it should fail"
  exit 1
fi
if printf '%s\n' "$out" | grep -q '^FAIL:'; then
  echo "FAIL: a rank reported a failure (above)"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq "$want"; then
  echo "FAIL: the output does not match: $want"
  exit 1
fi
echo "ok: the job ended with status $rc in ${took} s"
