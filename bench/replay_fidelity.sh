#!/usr/bin/env bash
# Does the daemon, replaying a trace on emulated GPUs at a high time scale, reach the makespan the
# simulator predicts for the same trace and policy? (Issue 22: within 3 % at --time-scale 100
# under the paper's policies; reported for `carma` too.) See bench/README.md, "Replay fidelity".
#
# For each policy: a fresh `carma serve --gpus emulated:4xA100-40GB --policy P --time-scale K`,
# `carma replay TRACE --time-scale K --wait` against it, and `carma simulate TRACE --policy P`.
# The replay's makespan (first submission to last finish, in trace time) over the simulator's,
# the replay's OOM crashes, and whether the daemon's loop kept up (GET /v1/status `loop`): a
# replay whose loop fell behind is not a measurement of fidelity, and is marked so.
#
#   bench/replay_fidelity.sh                     t1, K=100, oracle-MAGM OR-RR exclusive carma
#   bench/replay_fidelity.sh TRACE K POLICY...
#
# Needs a quiet machine: at K=100 the loop's period is 10 ms. Environment: CARMA_BUILD_DIR
# (default build/), CARMA_BENCH_KEEP=1 keeps the temp dir. Raw results:
# $build/bench-results/replay_fidelity.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CARMA_BUILD_DIR:-$root/build}
carma=$build/carma
trace=${1:-t1}
k=${2:-100}
shift $(( $# >= 2 ? 2 : $# ))
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=(oracle-MAGM OR-RR exclusive carma)
[ -x "$carma" ] || { echo "no $carma: build first (scripts/build)" >&2; exit 1; }

work=$(mktemp -d)
cleanup() {
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null || true
  [ "${CARMA_BENCH_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$build/bench-results"
out=$build/bench-results/replay_fidelity.txt
printf '%-12s %12s %12s %7s %6s %s\n' policy replay_h simulate_h ratio ooms loop | tee "$out"

for p in "${policies[@]}"; do
  dir=$work/$p
  mkdir -p "$dir"
  "$carma" serve --gpus emulated:4xA100-40GB --policy "$p" --time-scale "$k" \
    --state-dir "$dir/state" --socket "$dir/s.sock" >"$dir/daemon.log" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do
    "$carma" queue --socket "$dir/s.sock" >/dev/null 2>&1 && break
    sleep 0.1
  done
  "$carma" replay "$trace" --socket "$dir/s.sock" --time-scale "$k" --wait >"$dir/replay.txt" 2>&1
  curl -s --unix-socket "$dir/s.sock" http://localhost/v1/status >"$dir/status.json" || true
  curl -s --unix-socket "$dir/s.sock" "http://localhost/v1/acct?limit=10000" >"$dir/acct.json" || true
  kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=
  # First submission to last finish, from the daemon's own timestamps, in trace time.
  replay_h=$(python3 - "$dir/acct.json" "$k" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["tasks"]
span = max(r["finished_at"] for r in rows) - min(r["submitted_at"] for r in rows)
print("{:.3f}".format(span * float(sys.argv[2]) / 3600))
EOF
)
  ooms=$(sed -n 's/^attempts: [0-9]* (\([0-9]*\) out of memory)$/\1/p' "$dir/replay.txt")
  "$carma" simulate --trace "$trace" --policy "$p" --json --quiet >"$dir/simulate.json" 2>&1
  read -r sim_h loop <<<"$(python3 - "$dir/simulate.json" "$dir/status.json" <<'EOF2'
import json, sys
result = json.load(open(sys.argv[1]))["results"][0]
try:
    lag = json.load(open(sys.argv[2]))["loop"]
    state = "BEHIND" if lag["behind"] else "kept-up"
    loop = "{} (late {} of {})".format(state, lag["late_periods"], lag["periods"])
except Exception:
    loop = "unknown"
print("{:.3f} {}".format(result["makespan_s"] / 3600, loop))
EOF2
)"
  ratio=$(python3 -c "print(f'{$replay_h / $sim_h:.3f}')" 2>/dev/null || echo nan)
  printf '%-12s %12s %12s %7s %6s %s\n' "$p" "$replay_h" "$sim_h" "$ratio" "${ooms:-?}" "$loop" | tee -a "$out"
done
