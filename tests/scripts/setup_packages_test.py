#!/usr/bin/env python3
"""Every file the configure and build steps read from the system comes from scripts/setup.sh.

A fresh Debian machine gets exactly the packages of `scripts/setup.sh --list` and what they
pull in through Depends and Pre-Depends (apt runs with --no-install-recommends). A machine
that has been used before may hold more, and then the build passes there and fails on a fresh
one: Debian's libdnnl-dev only recommends ocl-icd-opencl-dev, yet its CMake package config
requires OpenCL.

So this test reads, from a configured and built tree, the system files it used:
  - the configure: every FILEPATH in CMakeCache.txt (libraries, programs found by find_*), and
    every CMake file the configure read (the implicit inputs of build.ninja's RERUN_CMAKE edge);
  - the build: every header the compilers read (`ninja -t deps`) and every library on a link
    line (absolute paths, and -lNAME resolved in the system's library directories);
maps each to its Debian package with `dpkg-query -S`, and checks that the package is in the
closure of setup.sh's list over Depends and Pre-Depends (of the installed packages; where a
dependency has alternatives, every installed alternative counts), plus the packages every
Debian system has (Essential or Priority: required). Files outside /usr, /lib*, /bin, /sbin
and /etc are not the system's (the optional CUDA toolkit lives in /usr/local) and are not
checked.

The shipped experiments read system files too: a text corpus that a package installs (`path =
"/usr/share/..."` under [data] or a variant's `data.path`). Those paths are checked the same way,
so that `bench run experiments/X.toml` finds its corpus on a fresh machine.

Usage: setup_packages_test.py BUILD_DIR SOURCE_DIR. Exit 0 pass, 1 fail, 77 skipped (no dpkg).
"""
import os
import re
import shutil
import subprocess
import sys

SYSTEM = ("/usr/", "/lib/", "/lib64/", "/lib32/", "/bin/", "/sbin/", "/etc/")
NOT_SYSTEM = ("/usr/local/",)
LIBRARY_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib", "/lib")


def is_system(path):
    return path.startswith(SYSTEM) and not path.startswith(NOT_SYSTEM)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def configure_files(build):
    """(file, why) for the files the configure step found and read."""
    found = []
    with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.+-]+):FILEPATH=(.+)$", line.strip())
            if m and os.path.isfile(m.group(2)):
                found.append((m.group(2), f"configure ({m.group(1)})"))
    ninja = os.path.join(build, "build.ninja")
    if os.path.exists(ninja):
        text = open(ninja, encoding="utf-8").read().replace("$\n", " ")
        for line in text.splitlines():
            if line.startswith("build build.ninja") and "RERUN_CMAKE" in line:
                deps = line.split("|", 1)[1] if "|" in line else ""
                for tok in deps.split():
                    if tok.startswith("/") and os.path.isfile(tok):
                        found.append((tok, "configure (a CMake file it read)"))
    return found


def build_files(build):
    """(file, why) for the headers compiled and the libraries linked."""
    found = []
    ninja = shutil.which("ninja") or shutil.which("ninja-build")
    if ninja and os.path.exists(os.path.join(build, "build.ninja")):
        deps = run([ninja, "-C", build, "-t", "deps"])
        target = "?"
        for line in deps.stdout.splitlines():
            if line and not line[0].isspace():
                target = line.split(":", 1)[0]
            elif line.strip().startswith("/"):
                found.append((line.strip(), f"build (a header of {target})"))
        text = open(os.path.join(build, "build.ninja"), encoding="utf-8").read().replace("$\n", " ")
        for m in re.finditer(r"^\s*LINK_LIBRARIES = (.*)$", text, re.M):
            for tok in m.group(1).split():
                if tok.startswith("/") and os.path.isfile(tok):
                    found.append((tok, "build (linked)"))
                elif tok.startswith("-l") and not tok.startswith("-l:"):
                    for d in LIBRARY_DIRS:
                        for name in (f"lib{tok[2:]}.so", f"lib{tok[2:]}.a"):
                            p = os.path.join(d, name)
                            if os.path.exists(p):
                                found.append((p, f"build (linked as {tok})"))
                                break
                        else:
                            continue
                        break
    return found


def usr_merged(path):
    """The other spelling of a path on a merged-/usr system (/lib/x <-> /usr/lib/x)."""
    for a in ("/lib/", "/lib64/", "/bin/", "/sbin/"):
        if path.startswith(a):
            return "/usr" + path
        if path.startswith("/usr" + a):
            return path[4:]
    return None


def owners(paths):
    """{path: package} for the paths dpkg knows (the path itself, else its /usr-merged
    spelling, else where its symlinks lead)."""
    result = {}

    def query(batch):
        out = {}
        for i in range(0, len(batch), 200):
            r = run(["dpkg-query", "-S", *batch[i:i + 200]])
            for line in r.stdout.splitlines():
                if line.startswith("diversion by"):
                    continue
                pkgs, _, path = line.partition(": ")
                out.setdefault(path.strip(), pkgs.split(",")[0].strip().split(":")[0])
        return out

    direct = query(sorted(set(paths)))
    for p in paths:
        if p in direct:
            result[p] = direct[p]
    for p in [p for p in paths if p not in result]:
        for alt in (usr_merged(p), os.path.realpath(p), usr_merged(os.path.realpath(p))):
            if alt:
                hit = query([alt])
                if alt in hit:
                    result[p] = hit[alt]
                    break
    return result


def installed():
    """{package: (depends, pre_depends, provides, base)} of the installed packages."""
    fmt = "${Package}\t${db:Status-Abbrev}\t${Depends}\t${Pre-Depends}\t${Provides}\t${Essential}\t${Priority}\n"
    r = run(["dpkg-query", "-W", "-f", fmt])
    pkgs = {}
    for line in r.stdout.splitlines():
        name, status, dep, pre, prov, essential, priority = (line.split("\t") + [""] * 7)[:7]
        if not status.startswith("ii"):
            continue
        pkgs[name] = (dep, pre, prov, essential == "yes" or priority == "required")
    return pkgs


def names(field):
    """The alternatives of each relation in a Depends-like field, without versions or archs."""
    groups = []
    for rel in filter(None, (r.strip() for r in field.split(","))):
        groups.append([re.split(r"[\s(:]", alt.strip(), maxsplit=1)[0] for alt in rel.split("|")])
    return groups


def closure(roots, pkgs):
    providers = {}
    for name, (_, _, prov, _) in pkgs.items():
        for group in names(prov):
            for virtual in group:
                providers.setdefault(virtual, set()).add(name)
    seen = set()
    todo = [p for p in roots if p in pkgs] + [n for n, v in pkgs.items() if v[3]]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        dep, pre, _, _ = pkgs[p]
        for group in names(dep) + names(pre):
            for alt in group:
                for real in ({alt} if alt in pkgs else set()) | providers.get(alt, set()):
                    if real not in seen:
                        todo.append(real)
    return seen


def experiment_files(source):
    """(path, why) for every absolute path an experiment file of experiments/ names as `path`."""
    out = []
    folder = os.path.join(source, "experiments")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".toml"):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            for line in f:
                m = re.match(r'\s*(?:data\.)?path\s*=\s*"(/[^"]+)"', line)
                if m:
                    out.append((m.group(1).rstrip("/"), f"experiment experiments/{name}"))
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build, source = (os.path.abspath(a) for a in sys.argv[1:3])
    if not shutil.which("dpkg-query"):
        print("setup_packages: not a Debian system (no dpkg-query): skipped")
        return 77
    listed = run([os.path.join(source, "scripts", "setup.sh"), "--list"])
    if listed.returncode != 0 or not listed.stdout.split():
        print(f"setup_packages: scripts/setup.sh --list failed: {listed.stderr.strip()}")
        return 1
    roots = listed.stdout.split()
    pkgs = installed()
    missing_roots = [p for p in roots if p not in pkgs]
    if missing_roots:
        print(f"setup_packages: setup.sh lists packages that are not installed: {' '.join(missing_roots)}")
        return 1
    allowed = closure(roots, pkgs)

    used = [(f, why) for f, why in configure_files(build) + build_files(build) + experiment_files(source)
            if is_system(f) and not f.startswith((build + "/", source + "/"))]
    files = sorted({f for f, _ in used})
    owner = owners(files)
    why = {}
    for f, w in used:
        why.setdefault(f, w)

    bad = {}
    unowned = []
    for f in files:
        if f not in owner:
            unowned.append(f)
        elif owner[f] not in allowed:
            bad.setdefault(owner[f], []).append(f)
    packages = sorted({owner[f] for f in files if f in owner})
    print(f"setup_packages: {len(files)} system files read by the configure and build, from "
          f"{len(packages)} packages; setup.sh lists {len(roots)}, {len(allowed)} with their "
          f"Depends and the base system")
    for pkg, fs in sorted(bad.items()):
        print(f"FAIL: package {pkg} is not installed by scripts/setup.sh (not in its list nor "
              f"pulled in through Depends), yet {len(fs)} of its files are read, e.g. "
              f"{fs[0]} by the {why[fs[0]]}")
    for f in unowned:
        print(f"FAIL: {f} (read by the {why[f]}) belongs to no Debian package")
    return 1 if bad or unowned else 0


if __name__ == "__main__":
    sys.exit(main())
