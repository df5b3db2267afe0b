#!/usr/bin/env python3
"""`cuda_check --list` names every row that cuda_check runs, and nothing it does not run.

Usage: check_list_test.py CUDA_CHECK

The list is written by hand (cuda_check.cu, list()) beside the rows, which are made in several
files; gpu-check's readers and `--only` go by those names. This runs the program's dry run (the CPU
executor at small sizes, as the cuda.check_cpu test and gpu-check.sh --dry-run do: every row
runs, most SKIPPED) and matches each row's name against the listed ones, where `<...>` in a
listed name stands for any text and a trailing " ..." for any further path ("gemm/cublaslt ...").
Fails on a row no listed name matches, and on a listed name that no row matches.
"""
import re
import subprocess
import sys


def pattern(listed):
    """The regular expression of a listed name."""
    text = re.escape(listed.replace(" ...", "/<any>"))
    return re.compile("^" + re.sub(r"<[^>]*>", ".+", text) + "$")


def main():
    program = sys.argv[1]
    listed = [n for n in subprocess.run([program, "--list"], capture_output=True, text=True, check=True).stdout.split("\n") if n]
    run = subprocess.run([program, "--backend", "cpu", "--small"], capture_output=True, text=True)
    rows = []
    for line in run.stdout.split("\n"):
        m = re.match(r"timing / (.*?): (PASS|FAIL|INFO|SKIPPED|TIMEOUT) ", line)
        if m:
            rows.append(m.group(1))
    if run.returncode != 0 or not rows:
        print(f"cuda_check --backend cpu --small: exit {run.returncode}, {len(rows)} rows\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
        return 1
    patterns = [(n, pattern(n)) for n in listed]
    unlisted = [r for r in rows if not any(p.match(r) for _, p in patterns)]
    unseen = [n for n, p in patterns if not any(p.match(r) for r in rows)]
    for r in unlisted:
        print(f"FAIL: the row '{r}' ran and --list names nothing that matches it")
    for n in unseen:
        print(f"FAIL: --list names '{n}' and no row of the dry run matches it")
    print(f"{len(rows)} rows, {len(listed)} listed names; {len(unlisted)} unlisted, {len(unseen)} unseen")
    return 1 if unlisted or unseen else 0


if __name__ == "__main__":
    sys.exit(main())
