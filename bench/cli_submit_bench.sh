#!/usr/bin/env bash
# Sequential `carma submit -- true` from a shell loop, one process per submission, as a user or a
# script submits (issue 9's "faster CLI"). Against, in the same run: `GET /healthz` from a fresh
# `curl --unix-socket` process each time (the floor of one process + one request) and
# `carma --version` (the floor of starting carma). Medians of CARMA_BENCH_REPS runs of N each.
#
# The daemon has one emulated GPU taken by a sleeping task, so every submission stays queued:
# what is measured is the CLI and the API, not launches. Everything started is stopped on exit.
#
#   bench/cli_submit_bench.sh            N=300, 5 runs
#   bench/cli_submit_bench.sh --quick    N=100, 3 runs
#
# Environment: CARMA_BUILD_DIR (default build/), CARMA_BENCH_CLI (another `carma` to measure with
# the same daemon, e.g. a previous version's), CARMA_BENCH_N, CARMA_BENCH_REPS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CARMA_BUILD_DIR:-$root/build}
n=300 reps=5
case "${1:-}" in
  --quick) n=100 reps=3 ;;
  "") ;;
  *) echo "usage: bench/cli_submit_bench.sh [--quick]" >&2; exit 2 ;;
esac
n=${CARMA_BENCH_N:-$n}
reps=${CARMA_BENCH_REPS:-$reps}
carma=$build/carma
cli=${CARMA_BENCH_CLI:-$carma}
for f in "$carma" "$build/carma-daemon" "$build/carma-shim" "$cli"; do
  [ -x "$f" ] || { echo "cli_submit_bench: $f is missing; build carma, carma-daemon, carma-shim" >&2; exit 1; }
done
command -v curl >/dev/null || { echo "cli_submit_bench: needs curl for the GET /healthz baseline" >&2; exit 1; }

tmp=$(mktemp -d /tmp/carma-cli-bench.XXXXXX)
sock=$tmp/carma.sock
export CARMA_SOCKET=$sock
daemon=
cleanup() {
  "$carma" cancel --me --state queued,running >/dev/null 2>&1 || true
  if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  for f in "$tmp"/state/attempts/*/*/task.pid; do
    [ -f "$f" ] && kill -KILL -- "-$(cat "$f")" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$(dirname "$0")/no_limits.sh"
# shellcheck disable=SC2046  # the config's path has no spaces
"$carma" serve --gpus emulated:1xA100-40GB --state-dir "$tmp/state" --socket "$sock" \
  --policy exclusive $(no_limits_args "$carma" "$tmp") >"$tmp/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 100); do curl -sf --unix-socket "$sock" http://localhost/healthz >/dev/null && break; sleep 0.1; done
"$carma" submit -- /bin/sleep 3600 >/dev/null
cd "$tmp"

per_second() {  # COMMAND...: N sequential runs -> runs per second
  local start end
  start=$(date +%s.%N)
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1; done
  end=$(date +%s.%N)
  echo "$n / ($end - $start)" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A runs
for r in $(seq "$reps"); do
  runs[healthz]+="$(per_second curl -s --unix-socket "$sock" http://localhost/healthz) "
  runs[version]+="$(per_second "$cli" --version) "
  runs[submit]+="$(per_second "$cli" submit -- true) "
done
for k in healthz version submit; do
  m=$(echo "${runs[$k]}" | tr ' ' '\n' | grep . | median)
  printf '%-8s median %7.1f per s   runs: %s\n' "$k" "$m" "${runs[$k]}"
  eval "med_$k=$m"
done
printf 'submit / curl healthz = %.2f   submit / carma --version = %.2f\n' \
  "$(echo "$med_submit / $med_healthz" | bc -l)" "$(echo "$med_submit / $med_version" | bc -l)"
