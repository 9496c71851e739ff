#!/usr/bin/env python3
"""The parts of src/ and what each may include (docs/architecture.md, "The parts, bottom to top").

A part may include only the parts listed for it: no part includes a part above it. In src/cli/,
only daemon/ (what carma-daemon runs) may include the daemon and cluster parts, so those
libraries stay out of `carma`. Fails naming each include that breaks the rule, with the file
and line, and what the part may use.

    tests/architecture/layers_test.py SRC_DIR
"""

import pathlib
import re
import sys

# Each part and the parts it may include besides itself (data: the embedded data files).
ALLOWED = {
    "core": set(),
    "model": {"core", "data"},
    "sim": {"core", "data", "model"},
    "device": {"core", "model"},
    "exec": {"core"},
    "store": {"core"},
    "http": {"core"},
    "api": {"core", "data", "model", "sim", "exec", "http"},
    "cluster": {"core", "device", "exec", "http"},
    "daemon": {"core", "data", "model", "sim", "device", "exec", "store", "http", "api",
               "cluster"},
    "cli": {"core", "data", "model", "sim", "exec", "api"},
    # carma-daemon's commands (src/cli/daemon/) also wire the daemon and the agent.
    "cli/daemon": {"core", "data", "model", "sim", "exec", "api", "device", "store", "http",
                   "cluster", "daemon"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')


def part_of(rel: pathlib.PurePath) -> str:
    if rel.parts[0] == "cli" and len(rel.parts) > 2 and rel.parts[1] == "daemon":
        return "cli/daemon"
    return rel.parts[0]


def main() -> int:
    src = pathlib.Path(sys.argv[1])
    problems = []
    files = 0
    for path in sorted(src.rglob("*")):
        if path.suffix not in (".h", ".cpp", ".c") or not path.is_file():
            continue
        rel = path.relative_to(src)
        part = part_of(rel)
        if part not in ALLOWED:
            continue  # web/, data/: assets, no code of a part
        files += 1
        own = rel.parts[0]
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or m.group(1) == own or not (src / m.group(1)).is_dir():
                continue
            if m.group(1) not in ALLOWED[part]:
                problems.append(
                    f"src/{rel}:{number} includes {m.group(1)}/, which {part} may not use "
                    f"(it may use: {', '.join(sorted(ALLOWED[part])) or 'nothing but itself'}); "
                    f"move what it needs below {part}, or the code up into a part that may")
    if files == 0:
        print(f"FAIL: no source files under {src}: give the repository's src/ directory")
        return 1
    for p in problems:
        print(f"FAIL: {p}")
    if problems:
        return 1
    print(f"PASS {files} files: no part includes a part above it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
