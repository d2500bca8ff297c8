#!/usr/bin/env python3
"""Writes a binary wheel of the dhtcrawler package from files already built, with the metadata
pyproject.toml gives (what scikit-build-core would write for `pip install .`).

usage: make_wheel.py --root CHECKOUT --tag cp311-cp311-linux_x86_64 --out DIR
                     --file DEST=SRC...      (extra files: the extension, the library, ...)
Prints the wheel's path. Needs Python 3.11 (tomllib).
"""
import argparse
import base64
import hashlib
import os
import tomllib
import zipfile


def metadata(project, readme):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}"]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    if "text" in project.get("license", {}):
        lines.append(f"License: {project['license']['text']}")
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {r}" for r in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for r in reqs:
            req, _, marker = r.partition(";")
            cond = f'({marker.strip()}) and extra == "{extra}"' if marker.strip() else f'extra == "{extra}"'
            lines.append(f"Requires-Dist: {req.strip()}; {cond}")
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + readme


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--file", action="append", default=[], metavar="DEST=SRC")
    args = ap.parse_args()
    with open(os.path.join(args.root, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    project = pyproject["project"]
    name, version = project["name"], project["version"]
    files = {}  # path in the wheel -> source file
    for package in pyproject["tool"]["scikit-build"]["wheel"]["packages"]:
        src = os.path.join(args.root, package)
        for dirpath, dirnames, filenames in os.walk(src):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fn in sorted(filenames):
                if not fn.endswith((".pyc", ".pyo")):
                    full = os.path.join(dirpath, fn)
                    files[os.path.join(os.path.basename(src), os.path.relpath(full, src))] = full
    for spec in args.file:
        dest, _, src = spec.partition("=")
        files[dest] = src

    dist_info = f"{name}-{version}.dist-info"
    readme = open(os.path.join(args.root, project["readme"]), encoding="utf-8").read()
    generated = {
        f"{dist_info}/METADATA": metadata(project, readme),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: dhtcrawler tools/release\nRoot-Is-Purelib: false\nTag: {args.tag}\n",
        f"{dist_info}/entry_points.txt": "[console_scripts]\n" + "".join(
            f"{k} = {v}\n" for k, v in project.get("scripts", {}).items()),
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"{name}-{version}-{args.tag}.whl")
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data, mode):
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arcname},sha256={digest},{len(data)}")
        for arcname, src in sorted(files.items()):
            with open(src, "rb") as f:
                add(arcname, f.read(), 0o755 if os.access(src, os.X_OK) else 0o644)
        for arcname, text in generated.items():
            add(arcname, text.encode(), 0o644)
        whl.writestr(f"{dist_info}/RECORD", "\n".join(record + [f"{dist_info}/RECORD,,"]) + "\n")
    print(path)


if __name__ == "__main__":
    main()
