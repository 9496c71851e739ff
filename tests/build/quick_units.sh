#!/usr/bin/env bash
# This test verifies that scripts/run's quick build still compiles: with CARMA_QUICK_BUILD every
# target is one translation unit (CMake's unity build), so two files of a target may not define
# the same name in their anonymous namespaces. It configures a quick build in a temporary
# directory and checks each target's unit with -fsyntax-only (about a tenth of building it), and
# names the clashing files when one fails.
#   tests/build/quick_units.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: quick_units.sh SOURCE_DIR}
for tool in cmake python3 c++; do
  command -v "$tool" >/dev/null || { echo "quick_units: $tool is missing (scripts/setup installs it)" >&2; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cmake -S "$src" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCARMA_QUICK_BUILD=ON \
  -DCARMA_BUILD_TESTS=OFF -DCARMA_BUILD_BENCH=OFF >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log" >&2; exit 1; }
# The embedded data is generated at build time; one of the units includes it.
cmake --build "$dir" --target carma_data >"$dir/data.log" 2>&1 || { cat "$dir/data.log" >&2; exit 1; }
python3 - "$dir" <<'PY'
import json, os, subprocess, sys, concurrent.futures as cf
build = sys.argv[1]
units = [e for e in json.load(open(os.path.join(build, "compile_commands.json")))
         if "/Unity/" in e["file"]]
if not units:
    sys.exit("quick_units: the quick build has no unity sources; is CMAKE_UNITY_BUILD still set?")
def check(e):
    command = e["command"].split(" -o ")[0] + " -fsyntax-only " + e["file"]
    r = subprocess.run(command, shell=True, cwd=e["directory"], capture_output=True, text=True)
    return e["file"], r.returncode, r.stderr
failed = 0
with cf.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
    for unit, rc, err in pool.map(check, units):
        target = os.path.basename(os.path.dirname(os.path.dirname(unit)))
        if rc != 0:
            failed += 1
            errors = [l for l in err.splitlines() if "error" in l or "note: " in l and "previous" in l]
            print(f"quick_units: {target} does not compile as one unit:", file=sys.stderr)
            for line in errors[:20]:
                print("  " + line, file=sys.stderr)
print(f"quick_units: {len(units) - failed} of {len(units)} targets compile as one unit")
if failed:
    print("Give the clashing helpers distinct names, or share one (a header of the part).",
          file=sys.stderr)
    sys.exit(1)
PY
