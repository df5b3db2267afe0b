#!/usr/bin/env python3
"""Runs clang-tidy (.clang-tidy: warnings are errors) over the harness, the plugins and the kernels.

Usage: clang_tidy.py CLANG_TIDY BUILD_DIR SOURCE_DIR [FILE...]   (BENCH_TIDY_VERBOSE=1: the units split)

Most of clang-tidy's time goes to the standard and third-party headers, which it parses and matches
again in every file (a PCH does not help: its declarations are matched as well). So the checks run
in two passes over every file, on two cores:

- Unity pass: the files that share one compile command (one target) are checked up to GROUP_SIZE at
  a time, as one generated translation unit that includes them, so that their common headers are
  parsed and matched once per unit instead of once per file. .clang-tidy's HeaderFilterRegex takes
  in `.cpp` files, so that a diagnostic in an included file is reported as in the file's own run.
  A unit with a diagnostic reruns its files one by one, and only those runs count: a unit adds no
  error that a file alone would not have. A unit that does not compile (one name defined in two
  of its files, e.g. in anonymous namespaces) is split, the files its errors name from the others,
  until its parts compile.
- Per-file pass: the checks whose result in a file depends on the rest of its translation unit run
  on a file alone, as before, but only where the file's own text can give them a diagnostic that
  its unit could hide (`needs_alone`; stop 52: 15 of 159 files, the whole test 490 -> 257 CPU-s):
  misc-unused-using-decls looks at the main file's using-declarations only, so a file without one
  has nothing to report; bugprone-signal-handler starts from a call of signal(), and a sibling's
  definition of a function the handler calls (unknown, so reported, in the file alone) could hide
  it; bugprone-forward-declaration-namespace reports an unreferenced forward declaration when a
  class of its name is declared in another namespace, which a sibling that references the
  declaration hides: it runs alone on the files that declare or define a class of a name that the
  tree forward-declares. What the text filter leaves to the unity pass: a forward declaration that
  collides only with a class of a header (ours or a library's) in a file whose sibling references
  it. A run with `-*` in its checks (the config's and these) reports none of clang's own warnings
  (clang-diagnostic-*): the compile's -Wall -Wextra are the build's to report (-Werror).

Every check of .clang-tidy runs on every file, in one of the two passes. A build whose targets are
unity builds (the default preset's) lists its units, not its files, in compile_commands.json: each
file of a unit is checked with the unit's command (compile_commands), as the build compiles it.
"""

import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

# The checks whose diagnostics in a file depend on what else is in its translation unit.
CONTEXT_CHECKS = ("misc-unused-using-decls", "bugprone-forward-declaration-namespace", "bugprone-signal-handler")
# `using` that is not a using-directive or an alias: a using-declaration (comments too: conservative).
USING_DECL = re.compile(r"\busing\b(?!\s+namespace\b)(?!\s+\w+\s*=)")
SIGNAL_CALL = re.compile(r"\bsignal\s*\(")
FORWARD_DECL = re.compile(r"^\s*(?:template\s*<[^>]*>\s*)?(?:class|struct|union)\s+(\w+)\s*;", re.M)
GROUP_SIZE = 12  # files per unity unit: larger saves little more and balances the two cores worse
JOBS = 2
BATCH = 4  # files per clang-tidy process in the per-file runs


def tidy_files(src):
    try:
        out = subprocess.run(["git", "ls-files", "harness/src/*.cpp", "plugins/*.cpp", "kernels/*.cpp"],
                             cwd=src, capture_output=True, text=True, check=True).stdout.split()
        if out:
            return sorted(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    return sorted(os.path.relpath(p, src) for p in walk(src, ("harness/src", "plugins", "kernels"), (".cpp",)))


def walk(src, tops, endings):
    """The files under src's folders `tops` whose names end in one of `endings` (absolute paths)."""
    found = []
    for top in tops:
        for root, _, names in os.walk(os.path.join(src, top)):
            found += [os.path.join(root, n) for n in names if n.endswith(endings)]
    return found


def tree_files(src):
    """The tree's headers and sources that a checked file can include (harness, plugins, kernels)."""
    return walk(src, ("harness", "plugins", "kernels"), (".h", ".hpp", ".cuh", ".cpp"))


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def needs_alone(src, files, context):
    """{file: the context checks it runs alone}: those whose diagnostic its own text makes possible.

    A signal() call in a header of the tree could reach any file: every file runs that check alone
    then, as it did before the filter."""
    tree = {p: read(p) for p in tree_files(src)}
    forward = {m.group(1) for text in tree.values() for m in FORWARD_DECL.finditer(text)}
    names = re.compile(r"\b(?:class|struct|union)\s+(?:%s)\b" % "|".join(sorted(forward))) if forward else None
    signal_in_header = any(SIGNAL_CALL.search(t) for p, t in tree.items() if not p.endswith(".cpp"))
    out = {}
    for rel in files:
        path = os.path.join(src, rel)
        text = tree[path] if path in tree else read(path)
        checks = []
        for c in context:
            if c == "misc-unused-using-decls":
                hit = USING_DECL.search(text)
            elif c == "bugprone-signal-handler":
                hit = signal_in_header or SIGNAL_CALL.search(text)
            elif c == "bugprone-forward-declaration-namespace":
                hit = names is not None and names.search(text)
            else:
                hit = True  # a context check this filter does not know: alone, everywhere
            if hit:
                checks.append(c)
        if checks:
            out[rel] = tuple(checks)
    return out


def group_key(entry, path):
    """The entry's compile command without its source and output files: files with one key can share a unit."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    key, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and a != path and os.path.normpath(os.path.join(entry["directory"], a)) != path:
            key.append(a)
    return entry["directory"], tuple(key)


def compile_commands(build):
    """build's compile commands by source file, one for each file of a unity unit too.

    A unity build (CMAKE_UNITY_BUILD, the default preset's) lists only its generated units,
    unity_N_<lang>.<ext>, each of which includes its target's .cpp files by absolute path: every
    file it includes is compiled with the unit's command, so that command, with the file in the
    unit's place, is the file's own.
    """
    try:
        with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
            entries = json.load(f)
    except OSError:
        return {}
    db = {}
    for e in entries:
        unit = os.path.normpath(os.path.join(e["directory"], e["file"]))
        if os.path.basename(os.path.dirname(unit)) != "Unity":
            db[unit] = e
            continue
        with open(unit, encoding="utf-8") as f:
            included = [line.split('"')[1] for line in f if line.startswith('#include "')]
        args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
        for path in included:
            own = [path if os.path.normpath(os.path.join(e["directory"], a)) == unit else a for a in args]
            db[os.path.normpath(path)] = {"directory": e["directory"], "file": path, "command": shlex.join(own)}
    return db


def run(cmd, cwd):
    r = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    failed = r.returncode != 0 or "error:" in r.stdout
    return failed, r.stdout


def main():
    tidy, build, src = sys.argv[1], os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
    common = [tidy, "--quiet", "--extra-arg=-Wno-unknown-warning-option"]
    listed = subprocess.run([tidy, "--list-checks", "--config-file=" + os.path.join(src, ".clang-tidy")],
                            capture_output=True, text=True, check=True).stdout.split()
    context = [c for c in CONTEXT_CHECKS if c in listed]
    rest = "".join(",-" + c for c in context)

    files = sys.argv[4:] or tidy_files(src)  # files given (relative to SOURCE_DIR): only those
    db = compile_commands(build)
    groups, alone = {}, []
    for rel in files:
        path = os.path.join(src, rel)
        if path in db:
            groups.setdefault(group_key(db[path], path), []).append(rel)
        else:
            alone.append(rel)  # no compile command of its own: checked alone, as clang-tidy infers one

    with tempfile.TemporaryDirectory(prefix="bench-tidy-") as tmp:
        db_out = []
        files_dir = os.path.join(tmp, "files")  # a command for each file, those of unity units too
        os.mkdir(files_dir)
        with open(os.path.join(files_dir, "compile_commands.json"), "w", encoding="utf-8") as f:
            json.dump(list(db.values()), f)

        def per_file(names, checks):
            extra = ["--checks=" + checks] if checks else []
            return [(common + ["-p", files_dir] + extra + names[i:i + BATCH], src)
                    for i in range(0, len(names), BATCH)]

        def unit_job(names):
            """A unit of names (files of one group): its compile command goes to tmp's compile_commands.json."""
            unit_dir = os.path.join(tmp, str(len(db_out)))  # its own compile_commands.json
            os.mkdir(unit_dir)
            unit = os.path.join(unit_dir, "unit.cpp")
            with open(unit, "w", encoding="utf-8") as f:
                f.writelines('#include "%s"  // NOLINT(bugprone-suspicious-include)\n' % os.path.join(src, n)
                             for n in names)
            directory, key = group_key(db[os.path.join(src, names[0])], os.path.join(src, names[0]))
            db_out.append({"directory": directory, "file": unit,
                           "command": shlex.join(list(key) + ["-o", unit + ".o", "-c", unit])})
            with open(os.path.join(unit_dir, "compile_commands.json"), "w", encoding="utf-8") as f:
                json.dump(db_out[-1:], f)
            cmd = common + ["-p", unit_dir, "--config-file=" + os.path.join(src, ".clang-tidy")]
            return (cmd + (["--checks=" + rest[1:]] if rest else []) + [unit], src), names

        # (job, names of a unit or None): units first, the longest jobs, so that the two cores end together.
        jobs = [unit_job(names[i:i + GROUP_SIZE]) for names in groups.values()
                for i in range(0, len(names), GROUP_SIZE)]
        n_units = len(jobs)
        if context:
            in_units = [n for names in groups.values() for n in names]
            by_checks, alone_runs = {}, needs_alone(src, in_units, context)
            for rel, checks in alone_runs.items():
                by_checks.setdefault(checks, []).append(rel)
            for checks, names in sorted(by_checks.items()):
                jobs += [(j, None) for j in per_file(names, "-*," + ",".join(checks))]
        jobs += [(j, None) for j in per_file(alone, "")]

        n_alone = len(alone_runs) if context else 0
        output, split = [], []
        with concurrent.futures.ThreadPoolExecutor(JOBS) as pool:
            pending = {pool.submit(run, *job): names for job, names in jobs}
            while pending:
                done, _ = concurrent.futures.wait(pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for future in done:
                    names = pending.pop(future)
                    bad, out = future.result()
                    if not bad:
                        continue
                    if names is None:  # a file's own run: it counts
                        output.append(out)
                        continue
                    # A unit with a diagnostic. Its files' own runs count: a check's diagnostic is
                    # reported as the file alone reports it. A unit that does not compile (one name
                    # defined in two of its files) is split instead, down to files that share a unit.
                    errors = [x for x in out.splitlines() if "error:" in x]
                    split.append("%s: %s" % (" ".join(names), errors[0] if errors else "exit status only"))
                    conflict = errors and all(x.endswith("[clang-diagnostic-error]") for x in errors)
                    if len(names) == 1 or not conflict:
                        for job in per_file(names, rest[1:]):
                            pending[pool.submit(run, *job)] = None
                    else:
                        # The files of the second definitions apart from the others; halves where
                        # the errors name none or all of them.
                        later = [n for n in names if any(os.path.join(src, n) + ":" in x for x in errors)]
                        if not later or len(later) == len(names):
                            later = names[(len(names) + 1) // 2:]
                        for part in ([n for n in names if n not in later], later):
                            job, _ = unit_job(part)
                            pending[pool.submit(run, *job)] = part

    if os.environ.get("BENCH_TIDY_VERBOSE") or output:
        for line in split:  # units that were split: slower, not wrong, but worth a look when clean
            print("unit split: " + line)
    if output:
        lines = "".join(output).splitlines()
        shown, seen = [], set()
        for i, line in enumerate(lines):
            if "error:" in line and line not in seen:  # a header's diagnostic once, not once per file
                seen.add(line)
                shown += lines[i:i + 4]
        print("\n".join(shown[:100]) if shown else "clang-tidy failed without a diagnostic")
        return 1
    print("clang-tidy: clean (%d files, %d units, %d splits; %d files alone for %s)" %
          (len(files), n_units, len(split), n_alone, ", ".join(context) or "no check"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
