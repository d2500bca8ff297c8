#!/usr/bin/env python3
"""Fails when an #include under core/ climbs the floors listed in cmake/include_floors.txt.

Usage: check_includes.py [repository root]. Prints every climbing include and exits 1, or
prints a one-line summary and exits 0.
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def read_floors(path):
    """The rooms in floor order (bottom first) and the allowed (file, header) exceptions."""
    floors, allowed = [], set()
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("allow "):
            source, _, header = line[len("allow "):].partition("->")
            allowed.add((source.strip(), header.strip()))
        else:
            floors.append(line)
    return floors, allowed


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    floors, allowed = read_floors(root / "cmake" / "include_floors.txt")
    level = {room: i for i, room in enumerate(floors)}
    core = root / "core"
    errors, checked, used = [], 0, set()
    for path in sorted(core.rglob("*")):
        if path.suffix not in (".hpp", ".cpp", ".h") or path.parent == core:
            continue
        room = path.relative_to(core).parts[0]
        if room not in level:
            errors.append(f"core/{path.relative_to(core)}: room '{room}' is not in cmake/include_floors.txt")
            continue
        source = str(path.relative_to(root))
        for number, text in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(text)
            if not match:
                continue
            header = match.group(1)
            target = header.split("/", 1)[0] if "/" in header else None
            if target is None or target not in level:
                continue  # a header of this folder, a generated one, or not ours
            checked += 1
            if target == room or level[target] < level[room]:
                continue
            if (source, header) in allowed:
                used.add((source, header))
                continue
            errors.append(f"{source}:{number}: {room}/ includes {header}, which is not below it")
    errors += [f"cmake/include_floors.txt: stale exception {s} -> {h}" for s, h in sorted(allowed - used)]
    for error in errors:
        print(error)
    if errors:
        print(f"include check: {len(errors)} problem(s); floors bottom-up: {' < '.join(floors)}")
        return 1
    print(f"include check: {checked} includes across {len(floors)} floors read top-down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
