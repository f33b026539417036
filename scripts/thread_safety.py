#!/usr/bin/env python3
"""make thread-safety: clang's lock analysis over the core's translation units.

Every class's locks are absl::Mutex with ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED /
... annotations (docs/architecture.md, "Locks say what they guard"). GCC ignores them; this runs clang over each
.cc of common/, master/, daemon/, libmc/ and cli/ with -fsyntax-only -Wthread-safety
-Werror=thread-safety, taking each file's flags from the normal build's
compile_commands.json (the generated Thrift headers must exist, so the build runs first).
Nothing is compiled to code, so it costs one parse per file. Other warnings stay warnings and
are not shown; a lock error fails the run and is printed with its notes.

Usage: thread_safety.py BUILD_DIR [--jobs N] [--clang clang++-14] [PATH_PREFIX...]
(PATH_PREFIX: only the files under it, e.g. daemon/ssd_; while fixing one area)
"""
import argparse
import concurrent.futures
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time

# The folders whose code is checked (tests, bench, fuzz, examples and bindings are not).
CORE = ("common/", "master/", "daemon/", "libmc/", "cli/")

FLAGS = ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety"]
# What our build's GCC flags name but clang does not know.
DROP = {"-Wno-maybe-uninitialized"}


def clang_command(entry, clang):
    args = entry.get("arguments") or shlex.split(entry["command"])
    # The compiler, after a launcher such as ccache when the build dir has one.
    while args and not re.search(r"(g\+\+|c\+\+|clang\+\+)(-[\d.]+)?$", os.path.basename(args[0])):
        args = args[1:]
    out, skip = [clang], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and a not in DROP:
            out.append(a)
    return out + FLAGS


def check(entry, clang):
    cmd = clang_command(entry, clang)
    p = subprocess.run(cmd, cwd=entry["directory"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    # Keep the thread-safety diagnostics and their notes, and hard errors.
    shown, keep = [], False
    for line in p.stdout.splitlines():
        if re.search(r": (error|warning|note): ", line):
            keep = ("-Wthread-safety" in line or ": error: " in line or
                    (keep and ": note: " in line))
        if keep:
            shown.append(line)
    return p.returncode, "\n".join(shown)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build_dir")
    ap.add_argument("--jobs", type=int, default=os.cpu_count())
    ap.add_argument("--clang", default="clang++-14" if shutil.which("clang++-14") else "clang++")
    ap.add_argument("only", nargs="*", help="check only the files under these prefixes")
    opts = ap.parse_intermixed_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    db_path = os.path.join(opts.build_dir, "compile_commands.json")
    if not os.path.exists(db_path):
        sys.exit(f"thread-safety: {db_path} missing: configure the build with "
                 "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON (make build does)")
    seen, units = set(), []
    for e in json.load(open(db_path)):
        rel = os.path.relpath(e["file"], root)
        if (rel.startswith(CORE) and rel.endswith(".cc")
                and rel not in seen and (not opts.only or rel.startswith(tuple(opts.only)))):
            seen.add(rel)  # a file built into two targets is checked once
            units.append((rel, e))
    units.sort()
    start = time.time()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        for (rel, _), (rc, text) in zip(units, pool.map(lambda u: check(u[1], opts.clang), units)):
            if rc != 0:
                failed.append(rel)
                print(text or f"{rel}: clang failed (exit {rc})", flush=True)
    took = time.time() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"thread-safety: {len(units)} files checked with {opts.clang} -Wthread-safety "
          f"in {took:.0f} s ({opts.jobs} jobs, {used.ru_utime + used.ru_stime:.0f} s of CPU): "
          + ("clean" if not failed else f"{len(failed)} FAILED: {' '.join(failed)}"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
