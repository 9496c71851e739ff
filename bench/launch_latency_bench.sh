#!/usr/bin/env bash
# The API's latency while the daemon launches tasks (hardening issue: p99 < 50 ms). See
# bench/README.md, section "API latency while tasks launch".
#
# Each run starts a fresh `carma serve` on 8 emulated A100-40GB GPUs, policy exclusive, time scale
# 10 (a scheduler tick every 0.1 s), and once every GPU's first window has filled:
#   1. idle:      P GET /v1/status, 20 ms apart, nothing queued or running (the baseline);
#   2. launching: S tasks `/bin/sleep 0.3` submitted at once; while they go through the 8 GPUs
#                 (a launch whenever one ends, i.e. launches on nearly every tick) the same probe.
# GET /v1/status takes the lock the scheduler loop holds while it works, so it shows how long the
# API waits for a tick. Figures: p50/p99/max per phase (nearest rank), the ratio of the p99s,
# and how many tasks started per second during the probe; medians over R runs.
#
#   bench/launch_latency_bench.sh            R=5 runs, P=500 probes, S=400 tasks
#   bench/launch_latency_bench.sh --quick    R=3 runs, P=300 probes, S=250 tasks
#
# Environment: CARMA_BUILD_DIR (default build/), CARMA_BENCH_NO_BUILD=1 (use what is built),
# CARMA_BENCH_DAEMON_DIR: a directory holding the `carma` and `carma-shim` to measure (default:
# the build directory), e.g. an older build for a before/after comparison in the same session;
# CARMA_BENCH_KEEP=1 keeps the temp dir. Raw results: $build/bench-results/launch_latency.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CARMA_BUILD_DIR:-$root/build}

runs=5 probes=500 tasks=400
case "${1:-}" in
  --quick) runs=3 probes=300 tasks=250 ;;
  "") ;;
  *) echo "usage: bench/launch_latency_bench.sh [--quick]" >&2; exit 2 ;;
esac

if [ "${CARMA_BENCH_NO_BUILD:-0}" != "1" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${CARMA_BUILD_TYPE:-Release}" \
    -DCARMA_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target carma carma-shim submit_load \
    >/dev/null
fi
daemon_dir=${CARMA_BENCH_DAEMON_DIR:-$build}
carma=$daemon_dir/carma
load=$build/bench/submit_load
for f in "$carma" "$daemon_dir/carma-shim" "$load"; do
  if [ ! -x "$f" ]; then
    echo "launch_latency_bench: $f is missing; build the targets carma, carma-shim, submit_load" >&2
    exit 1
  fi
done
mkdir -p "$build/bench-results"
raw=$build/bench-results/launch_latency.txt
: >"$raw"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/carma-launch-bench.XXXXXX")
pid=0
log() { echo "launch_latency_bench: $*" >&2; }
source "$root/bench/no_limits.sh"

cleanup() {
  if [ "$pid" != 0 ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  pkill -f "$tmp/" 2>/dev/null || true  # supervisors and sleeps of the runs
  if [ "${CARMA_BENCH_KEEP:-0}" = "1" ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
  if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
started() {  # tasks the daemon has started so far (running + finished), from its event count
  "$load" status --socket "$1" >/dev/null
  ls "$2/attempts" 2>/dev/null | wc -l
}

log "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPU(s), load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "daemon $carma; $runs run(s), $probes probes, $tasks tasks"
declare -a idle50 idle99 busy50 busy99 busymax rates
for r in $(seq "$runs"); do
  dir=$tmp/run$r
  mkdir -p "$dir"
  sock=$dir/carma.sock
  # shellcheck disable=SC2046  # the config's path has no spaces
  "$carma" serve --gpus emulated:8xA100-40GB --state-dir "$dir/state" --socket "$sock" \
    --time-scale 10 --policy exclusive $(no_limits_args "$carma" "$dir") >"$dir/daemon.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    if [ -S "$sock" ] && "$load" healthz --socket "$sock" -n 1 >/dev/null 2>&1; then break; fi
    sleep 0.05
  done
  "$load" wait-window --socket "$sock" --samples 30 --timeout 60
  idle=$("$load" probe --socket "$sock" -n "$probes" --interval-ms 20)
  "$load" submit --socket "$sock" -n "$tasks" -c 1 --any-state --command /bin/sleep 0.3 >/dev/null
  n0=$(started "$sock" "$dir/state")
  t0=$(date +%s.%N)
  busy=$("$load" probe --socket "$sock" -n "$probes" --interval-ms 20)
  t1=$(date +%s.%N)
  n1=$(started "$sock" "$dir/state")
  rate=$(awk -v a="$n0" -v b="$n1" -v t0="$t0" -v t1="$t1" 'BEGIN {printf "%.1f", (b - a) / (t1 - t0)}')
  echo "run=$r idle: $idle" >>"$raw"
  echo "run=$r launching: $busy tasks_started_per_s=$rate" >>"$raw"
  idle50+=("$(echo "$idle" | field p50_ms)") idle99+=("$(echo "$idle" | field p99_ms)")
  busy50+=("$(echo "$busy" | field p50_ms)") busy99+=("$(echo "$busy" | field p99_ms)")
  busymax+=("$(echo "$busy" | field max_ms)") rates+=("$rate")
  log "  run $r: idle p99 ${idle99[-1]} ms; launching p99 ${busy99[-1]} ms, max ${busymax[-1]} ms, $rate tasks started/s"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=0
  pkill -f "$dir/" 2>/dev/null || true
done

i99=$(echo "${idle99[*]}" | median)
b99=$(echo "${busy99[*]}" | median)
echo
echo "== GET /v1/status while the daemon launches tasks ($carma; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg); raw: $raw)"
printf '%-40s %10s %10s %10s  %s\n' "phase" "p50 ms" "p99 ms" "max ms" "runs (p99)"
printf '%-40s %10s %10s %10s  %s\n' "idle (baseline)" "$(echo "${idle50[*]}" | median)" "$i99" "-" "${idle99[*]}"
printf '%-40s %10s %10s %10s  %s\n' "launching ($(echo "${rates[*]}" | median) tasks started/s)" \
  "$(echo "${busy50[*]}" | median)" "$b99" "$(echo "${busymax[*]}" | median)" "${busy99[*]}"
echo "p99 while launching / p99 idle: $(awk -v a="$b99" -v b="$i99" 'BEGIN {printf "%.2f", a / b}') (aim: p99 < 50 ms)"
