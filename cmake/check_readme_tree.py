#!/usr/bin/env python3
"""Fails when README.md's "How the tree is organised" no longer matches the tree.

Usage: check_readme_tree.py [repository root]. The section's unindented entries must be the
repository's top-level folders (build output, dist/ and hidden folders but .ci/ aside), and
compose.yaml; every folder of core/, tests/ and tools/ (and every file of tools/) must be
named in its parent's part of the section. Prints what is missing or gone and exits 1, or a
one-line summary and exits 0.
"""
import pathlib
import re
import sys

IGNORED = {"build", "dist", "__pycache__", ".git", ".venv", ".pytest_cache"}
ENTRY = re.compile(r"^(\S+?)/?\s")  # an unindented entry: its name, without the slash


def section(readme):
    text = readme.read_text(encoding="utf-8")
    start = text.index("## How the tree is organised")
    block = text[start:].split("```", 2)[1]
    return block.splitlines()


def parts(lines):
    """Each unindented entry's name -> the text of its lines (its own and the indented ones)."""
    out, current = {}, None
    for line in lines:
        m = ENTRY.match(line + " ")
        if m:
            current = m.group(1)
            out[current] = line
        elif current is not None:
            out[current] += "\n" + line
    return out


def folders(path):
    return sorted(p.name for p in path.iterdir()
                  if p.is_dir() and p.name not in IGNORED and (not p.name.startswith(".") or p.name == ".ci"))


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    entries = parts(section(root / "README.md"))
    problems = []
    expected = set(folders(root)) | {"compose.yaml"}
    for name in sorted(expected - set(entries)):
        problems.append(f"{name}: in the tree, not in the README's tree section")
    for name in sorted(set(entries) - expected):
        problems.append(f"{name}: in the README's tree section, not in the tree")
    children = {"core": folders(root / "core"), "tests": folders(root / "tests"),
                "tools": folders(root / "tools") + sorted(p.name for p in (root / "tools").iterdir() if p.is_file())}
    for parent, names in children.items():
        text = entries.get(parent, "")
        for name in names:
            if not re.search(r"(?<![\w.-])" + re.escape(name) + r"(?![\w.-]|/\w)", text):
                problems.append(f"{parent}/{name}: not named in the README's tree section")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"README tree: {len(expected)} top-level entries and "
          f"{sum(len(v) for v in children.values())} in core/, tests/ and tools/ named")
    return 0


if __name__ == "__main__":
    sys.exit(main())
