#!/usr/bin/env python3
"""Makes a tree of ELF files self-contained, the way auditwheel repairs a wheel, for the
artifacts that are not wheels (the jar's native directory, the SDK).

Every shared library the given files need, directly or through each other, that is neither
in the tree nor glibc or the C++ runtime (libstdc++, libgcc_s, which the
manylinux policy allows too) is copied into LIBDIR under a name of its own (libssl-1a2b3c4d.so.3),
so it never clashes with the host's copy of the same library; every file's NEEDED entries are
rewritten to those names and its RUNPATH points at LIBDIR relative to itself ($ORIGIN).

usage: bundle_libs.py LIBDIR ELF... [--search DIR]...   (prints what it copied)
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

# glibc and the C++ runtime (libstdc++, libgcc_s): the part of the manylinux policy's
# libraries that a Linux with any C++ program on it has. Everything else is bundled.
ALLOWED = re.compile(
    r"^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libdl\.so\.2|"
    r"librt\.so\.1|libpthread\.so\.0|libresolv\.so\.2|libutil\.so\.1|libnsl\.so\.1|libanl\.so\.1|"
    r"libstdc\+\+\.so\.6|libgcc_s\.so\.1)$")


def needed(path):
    out = subprocess.run(["patchelf", "--print-needed", path], check=True, capture_output=True, text=True).stdout
    return out.split()


def resolve(path, search):
    """Maps each library `path` needs (directly or not) to the file ldd finds for it."""
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(search))
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True, env=env).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m:
            if m.group(2) == "not":
                sys.exit(f"bundle_libs: {path} needs {m.group(1)}, which is not found")
            found[m.group(1)] = m.group(2)
    return found


def unique_name(soname, real_path):
    digest = hashlib.sha256(open(real_path, "rb").read()).hexdigest()[:8]
    stem, _, rest = soname.partition(".so")
    return f"{stem}-{digest}.so{rest}"


def set_runpath(path, libdir):
    rel = os.path.relpath(libdir, os.path.dirname(os.path.abspath(path)))
    runpath = "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"
    old = subprocess.run(["patchelf", "--print-rpath", path], check=True, capture_output=True, text=True).stdout.strip()
    entries = [runpath] + [e for e in old.split(":") if e.startswith("$ORIGIN") and e != runpath]
    subprocess.run(["patchelf", "--set-rpath", ":".join(entries), path], check=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("libdir")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--search", action="append", default=[], help="where the tree's own libraries are")
    args = ap.parse_args()
    os.makedirs(args.libdir, exist_ok=True)
    own = {os.path.basename(f) for f in args.files}
    search = [os.path.abspath(d) for d in args.search] + sorted({os.path.dirname(os.path.abspath(f)) for f in args.files})

    external = {}  # soname -> system path
    for f in args.files:
        for soname, real in resolve(f, search).items():
            if soname not in own and not ALLOWED.match(soname):
                external[soname] = real
    renamed = {so: unique_name(so, real) for so, real in external.items()}
    copies = []
    for soname, real in sorted(external.items()):
        target = os.path.join(args.libdir, renamed[soname])
        shutil.copy2(os.path.realpath(real), target)
        os.chmod(target, 0o755)
        subprocess.run(["patchelf", "--set-soname", renamed[soname], target], check=True)
        copies.append(target)
        print(f"bundled {soname} ({os.path.realpath(real)}) as {renamed[soname]}")
    for path in list(args.files) + copies:
        replace = [arg for so in needed(path) if so in renamed for arg in ("--replace-needed", so, renamed[so])]
        if replace:
            subprocess.run(["patchelf", *replace, path], check=True)
        set_runpath(path, args.libdir)
    # What the result needs now must come from the tree or be glibc and the C++ runtime.
    inside = tuple(os.path.abspath(d) + "/" for d in [args.libdir] + search)
    for path in list(args.files) + copies:
        for soname, real in resolve(path, []).items():
            if not ALLOWED.match(soname) and not os.path.abspath(real).startswith(inside):
                sys.exit(f"bundle_libs: {path} still needs {soname} from {real}")

if __name__ == "__main__":
    main()
