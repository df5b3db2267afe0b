#!/usr/bin/env python3
"""Whether a change leaves the GPU's code as it was: compiles CUDA translation units of the
working tree and of a base (a commit, or a tree) to cubins with the build's own flags and compares
them byte for byte. A refactor of CUDA code proves itself here, as a refactor of the CPU path does
by norms.toml's stored losses; this machine has no GPU to time a changed kernel on.

  scripts/cuda_same.py [--build DIR] [--base REV | --base-dir TREE] [--keep DIR] [FILE.cu ...]

FILE.cu: translation units of DIR's compile_commands.json (default: every one), named by path or
by a unique end of it (flash_attention.cu, cuda_pass/unit_0.cu). --base: a commit (default HEAD),
exported by `git archive`; --base-dir: a source tree as it is. Each unit is compiled twice with
its command from the build, from one temporary folder that holds first the base's tree, then the
working tree's files (nvcc names a unit's anonymous namespace by a hash of its path; a generated
unit of the build, which #includes sources by absolute path, is copied there with its paths
rewritten), to one cubin a real architecture of its --generate-code, with a fixed
-frandom-seed (nvcc otherwise numbers some internal symbols at random); -Xptxas=-v and the
object's flags dropped. So equal bytes mean the same SASS, and the same source gives equal bytes.

Where a cubin differs and nvdisasm is found (NVDISASM, PATH, or the CUDA toolkit's bin), the
kernels that differ are listed with their SASS instruction counts, labels and the compiler's
per-unit name hashes normalized; without it, only that the bytes differ. (Debian's toolkit and
some NVIDIA images lack nvdisasm; PyPI's nvidia-cuda-nvdisasm wheel has it.)

Exit: 0 every unit the same, 1 one differs, 2 bad arguments or a compile that failed.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(f"cuda_same: {message}", file=sys.stderr)
    sys.exit(2)


def units(build):
    path = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(path):
        fail(f"no {path}: configure the build first (cmake --preset default)")
    with open(path) as f:
        entries = [e for e in json.load(f) if e["file"].endswith(".cu")]
    if not entries:
        fail(f"{path} has no CUDA unit: a build without nvcc")
    return entries


def pick(entries, names):
    if not names:
        return entries
    chosen = []
    for name in names:
        full = os.path.abspath(name)
        hits = [e for e in entries if e["file"] == full or e["file"].endswith("/" + name.lstrip("/"))]
        if len(hits) != 1:
            fail(f"{name}: {'no' if not hits else len(hits)} CUDA units of the build match it")
        chosen.append(hits[0])
    return chosen


def cubin_commands(entry, out_stem):
    """The unit's nvcc command turned into one compile a real architecture: [(arch, argv)]."""
    argv = shlex.split(entry["command"])
    kept, archs, skip = [], [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT"):
            skip = True
            continue
        if a in ("-c", "-MD") or a.startswith("-Xptxas=-v"):
            continue
        m = re.match(r"--generate-code=arch=compute_(\w+),code=\[(.*)\]", a)
        if m:
            archs += [c[3:] for c in m.group(2).split(",") if c.startswith("sm_")]
            continue
        kept.append(a)
    if not archs:
        fail(f"{entry['file']}: no --generate-code with a real architecture in its command")
    # nvcc numbers some internal symbols (a header's internal-linkage objects, cuda::std's
    # customization points among them) by a random number a compile: a fixed seed a unit makes
    # two compiles of one source the same bytes.
    seed = "-frandom-seed=" + re.sub(r"[^A-Za-z0-9_]", "_", os.path.basename(out_stem))
    return [(arch, kept + [seed, f"-arch=sm_{arch}", "-cubin", "-o", f"{out_stem}.sm_{arch}.cubin"]) for arch in archs]


def rebase(argv, entry, build, base):
    """argv with the source tree's paths pointed at the base's (the build's own kept), and a
    generated unit (a file of the build) copied with its #include paths rewritten."""
    def moved(a):  # the build's own paths (below the source tree, as build/) kept
        return build.join(part.replace(SOURCE, base) for part in a.split(build))

    out = [moved(a) for a in argv]
    if entry["file"].startswith(build + "/"):
        with open(entry["file"]) as f:
            text = f.read().replace(SOURCE + "/", base + "/")
        copy = os.path.join(base, ".cuda_same", os.path.relpath(entry["file"], build))
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        with open(copy, "w") as f:
            f.write(text)
        out = [copy if a == entry["file"] else a for a in out]
    return out


def compile_one(argv, cwd):
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    return r.returncode, r.stderr


def nvdisasm():
    for c in (os.environ.get("NVDISASM"), shutil.which("nvdisasm"), "/usr/local/cuda/bin/nvdisasm"):
        if c and os.access(c, os.X_OK):
            return c
    return None


def kernels(tool, cubin):
    """{kernel: [instruction, ...]} of a cubin, labels and per-unit name hashes normalized."""
    text = subprocess.run([tool, "-c", cubin], capture_output=True, text=True, check=True).stdout
    found, current = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*\.section\s+\.text\.([^,\s]+)", line)
        if m:
            current = re.sub(r"_GLOBAL__N__[0-9a-f]+_[0-9]+_", "_GLOBAL_", m.group(1))
            found[current] = []
            continue
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
        if m and current is not None:
            found[current].append(re.sub(r"_GLOBAL__N__[0-9a-f]+_[0-9]+_", "_GLOBAL_", re.sub(r"\.L_x_\d+", "L", m.group(1))))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(SOURCE, "build"), help="the build whose commands are used")
    ap.add_argument("--base", default="HEAD", help="the commit to compare with (default HEAD)")
    ap.add_argument("--base-dir", help="a source tree to compare with, as it is")
    ap.add_argument("--keep", help="keep the cubins in this folder (outside the source tree)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="compiles at once")
    ap.add_argument("files", nargs="*", metavar="FILE.cu", help="units of the build (default: every one)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    chosen = pick(units(build), args.files)

    work = tempfile.mkdtemp(prefix="cuda_same.")
    try:
        # Both trees are compiled from the same folder, one after the other: nvcc names a unit's
        # anonymous namespace by a hash of its path, so the same source at two paths differs.
        tree = os.path.join(work, "tree")
        if args.base_dir:
            label = os.path.abspath(args.base_dir)
        else:
            rev = subprocess.run(["git", "-C", SOURCE, "rev-parse", "--verify", "--quiet", args.base + "^{commit}"],
                                 capture_output=True, text=True)
            if rev.returncode != 0:
                fail(f"--base {args.base} is not a commit of {SOURCE}")
            label = f"{args.base} ({rev.stdout.strip()[:12]})"
        out = args.keep or work
        os.makedirs(os.path.join(out, "now"), exist_ok=True)
        os.makedirs(os.path.join(out, "base"), exist_ok=True)

        def place(which):
            shutil.rmtree(tree, ignore_errors=True)
            if which == "now":
                listed = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z", "-c", "-o", "--exclude-standard"],
                                        capture_output=True, check=True).stdout.decode().split("\0")
                for rel in filter(None, listed):
                    if os.path.isfile(os.path.join(SOURCE, rel)):
                        os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
                        shutil.copy2(os.path.join(SOURCE, rel), os.path.join(tree, rel))
            elif args.base_dir:
                shutil.copytree(os.path.abspath(args.base_dir), tree, symlinks=True,
                                ignore=shutil.ignore_patterns("build", ".git"))
            else:
                os.makedirs(tree)
                archive = subprocess.Popen(["git", "-C", SOURCE, "archive", rev.stdout.strip()], stdout=subprocess.PIPE)
                subprocess.run(["tar", "-x", "-C", tree], stdin=archive.stdout, check=True)
                archive.wait()

        def compile_all(which):
            place(which)
            jobs = []
            for e in chosen:
                stem = re.sub(r"[^A-Za-z0-9_.]", "_", os.path.relpath(e["file"], SOURCE))
                for arch, argv in cubin_commands(e, os.path.join(out, which, stem)):
                    jobs.append((e, arch, rebase(argv, e, build, tree), argv[-1]))
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                done = list(pool.map(lambda j: compile_one(j[2], j[0]["directory"]), jobs))
            for (e, arch, _, _), (rc, err) in zip(jobs, done):
                if rc:
                    print(f"FAILED   {os.path.relpath(e['file'], SOURCE)} sm_{arch}: the "
                          f"{'working tree' if which == 'now' else 'base'} does not compile")
                    sys.stderr.write(err[-2000:])
                    sys.exit(2)
            return jobs

        base_jobs = compile_all("base")
        now_jobs = compile_all("now")
        tool = nvdisasm()
        differ = 0
        print(f"cuda_same: the working tree against {label}, {len(now_jobs)} cubin(s)")
        for (e, arch, _, now_cubin), (_, _, _, base_cubin) in zip(now_jobs, base_jobs):
            name = f"{os.path.relpath(e['file'], SOURCE)} sm_{arch}"
            with open(now_cubin, "rb") as a, open(base_cubin, "rb") as b:
                same = a.read() == b.read()
            print(f"{'same' if same else 'DIFFERS':8} {name}")
            if same:
                continue
            differ += 1
            if not tool:
                print("         (no nvdisasm: set NVDISASM to list the kernels that differ)")
                continue
            now_k, base_k = kernels(tool, now_cubin), kernels(tool, base_cubin)
            for k in sorted(set(now_k) | set(base_k)):
                if now_k.get(k) != base_k.get(k):
                    n, b = len(now_k.get(k, [])), len(base_k.get(k, []))
                    print(f"         {b:6d} -> {n:6d} instructions  {k}")
            print(f"         ({sum(now_k.get(k) == base_k.get(k) for k in now_k)} of {len(now_k)} kernels the same)")
        print(f"cuda_same: {differ} of {len(now_jobs)} cubin(s) differ")
        return 1 if differ else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
