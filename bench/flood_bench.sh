#!/usr/bin/env bash
# One user's flood against `carma serve` (issue 18, "one user can drown the daemon"), measured for
# two builds side by side in one run: a baseline (a build of an earlier commit) and this tree's.
# See bench/README.md, section "Flood".
#
# Per build and run, on 4 emulated A100-40GB GPUs at time scale 60, policy carma:
#   1. start rate with 100 queued: 100 `/bin/true` tasks (one array), time until the daemon has
#      started them all -> attempts/s;
#   2. the flood: 10 arrays x 10,000 `/bin/true` tasks (100,000 queued), then with the queue full:
#      - start rate: attempts started over CARMA_BENCH_WINDOW s (carma_attempts_total);
#      - GET /v1/status, 200 requests 25 ms apart: p50/p99;
#      - GET /v1/view, 20 requests: p50/p99 and size;
#      - three clients at once each reading the whole GET /v1/timeline from 0 (every page, as
#        `carma report` does; the baseline answers it in one): the daemon's peak RSS (VmHWM);
#      - the database's size (carma.db + WAL);
#   3. amplification: a fresh daemon, one array of 10,000 tasks whose command carries a 20 KB
#      argument: what the database grew by.
# The limits this tree's daemon has by default would refuse the flood (that is their point), so
# it runs with them off (`limits:` all 0); the baseline has none.
#
#   bench/flood_bench.sh BASELINE_BUILD [--quick]   full: 3 runs; --quick: 1 run, 10 s windows
#
# BASELINE_BUILD is a build directory of the commit to compare with (its carma, carma-shim):
#   git worktree add /tmp/base <commit> && cmake -S /tmp/base -B /tmp/base/build \
#     -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/base/build --target carma carma-shim
# Environment: CARMA_BUILD_DIR (this tree's build, default build/), CARMA_BENCH_REPS,
# CARMA_BENCH_WINDOW (s), CARMA_BENCH_KEEP=1 keeps the temp dir. Raw lines go to
# $build/bench-results/flood_bench.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CARMA_BUILD_DIR:-$root/build}
base=${1:-}
[ -n "$base" ] && [ -x "$base/carma" ] || {
  echo "usage: bench/flood_bench.sh BASELINE_BUILD [--quick] (a build dir with carma, carma-shim)" >&2
  exit 2
}
base=$(cd "$base" && pwd)
reps=3 window=20
[ "${2:-}" = "--quick" ] && reps=1 window=10
reps=${CARMA_BENCH_REPS:-$reps}
window=${CARMA_BENCH_WINDOW:-$window}
load=$build/bench/submit_load
for f in "$build/carma" "$build/carma-shim" "$load" "$base/carma-shim"; do
  [ -x "$f" ] || { echo "flood_bench: $f is missing; build carma, carma-shim and submit_load" >&2; exit 1; }
done

tmp=$(mktemp -d /tmp/carma-flood-bench.XXXXXX)
out=$build/bench-results
mkdir -p "$out"
raw=$out/flood_bench.txt
: >"$raw"
declare -A alive
dirs=()
log() { echo "flood_bench: $*" >&2; }
record() { echo "$*" >>"$raw"; }
cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null || true; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
  if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }
now() { date +%s.%N; }

stop_daemon() {
  local pid=$1 i
  [ -n "${alive[$pid]:-}" ] || return 0
  unset "alive[$pid]"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local pid d f p
  for pid in "${!alive[@]}"; do stop_daemon "$pid"; done
  for d in "${dirs[@]}"; do  # supervisors that outlived their daemon (tasks are /bin/true)
    for f in "$d"/attempts/*/*/shim.pid; do
      [ -f "$f" ] || continue
      p=$(cat "$f")
      case "$(cmdline "$p")" in *carma-shim*) kill -TERM "$p" 2>/dev/null || true ;; esac
    done
  done
  if [ "${CARMA_BENCH_KEEP:-0}" = "1" ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

source "$root/bench/no_limits.sh"

# start BUILD NAME -> $sock, $pid
start() {
  local bin=$1 name=$2 i
  mkdir -p "$tmp/$name"
  sock=$tmp/$name/carma.sock
  # shellcheck disable=SC2046  # the config's path has no spaces
  "$bin/carma" serve --gpus emulated:4xA100-40GB --state-dir "$tmp/$name/state" --socket "$sock" \
    --time-scale 60 $(no_limits_args "$bin/carma" "$tmp/$name") >"$tmp/$name/daemon.log" 2>&1 &
  pid=$!
  alive[$pid]=1
  dirs+=("$tmp/$name/state")
  for i in $(seq 200); do
    [ -S "$sock" ] && "$load" healthz --socket "$sock" -n 1 >/dev/null 2>&1 && break
    sleep 0.05
  done
  "$load" wait-window --socket "$sock" --timeout 60 >/dev/null
}
attempts() { "$load" metric --socket "$1" --name carma_attempts_total; }
db_bytes() { du -cb "$1"/carma.db* 2>/dev/null | tail -1 | cut -f1; }
waitfor_attempts() {  # SOCK COUNT: until that many attempts started (at most 120 s)
  local i
  for i in $(seq 1200); do
    [ "$(attempts "$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

declare -A M  # "build metric" -> values of the runs
add() { M["$1 $2"]+="$3 "; }

one_run() {  # BUILD LABEL RUN
  local bin=$1 label=$2 r=$3 t0 t1 a0 a1 line hwm0
  start "$bin" "$label-$r-small"
  t0=$(now)
  "$load" submit --socket "$sock" -n 1 --array 0-99 --any-state --command /bin/true >/dev/null
  waitfor_attempts "$sock" 100
  t1=$(now)
  add "$label" start100 "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", 100 / (b - a)}')"
  stop_daemon "$pid"

  start "$bin" "$label-$r-flood"
  local dir=$tmp/$label-$r-flood/state
  t0=$(now)
  line=$("$load" submit --socket "$sock" -n 10 --array 0-9999 --any-state --command /bin/true)
  t1=$(now)
  record "$label run=$r flood_submit $line"
  add "$label" fill_s "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')"
  a0=$(attempts "$sock"); t0=$(now)
  sleep "$window"
  a1=$(attempts "$sock"); t1=$(now)
  add "$label" start100k "$(awk -v a="$a0" -v b="$a1" -v s="$t0" -v e="$t1" 'BEGIN {printf "%.1f", (b - a) / (e - s)}')"
  line=$("$load" probe --socket "$sock" -n 200 --interval-ms 25)
  record "$label run=$r status $line"
  add "$label" status_p50 "$(field p50_ms <<<"$line")"
  add "$label" status_p99 "$(field p99_ms <<<"$line")"
  line=$("$load" get --socket "$sock" --path /v1/view -n 20)
  record "$label run=$r view $line"
  add "$label" view_p50 "$(field p50_ms <<<"$line")"
  add "$label" view_p99 "$(field p99_ms <<<"$line")"
  add "$label" view_kb "$(awk -v b="$(field mean_bytes <<<"$line")" 'BEGIN {printf "%.0f", b / 1024}')"
  hwm0=$(status_kib "$pid" VmHWM)
  line=$("$load" timeline --socket "$sock" -c 3 --since 0 || true)
  record "$label run=$r timeline $line hwm_before_kib=$hwm0 hwm_after_kib=$(status_kib "$pid" VmHWM)"
  add "$label" timeline_hwm_mb "$(awk -v k="$(status_kib "$pid" VmHWM)" 'BEGIN {printf "%.0f", k / 1024}')"
  add "$label" timeline_s "$(field wall_s <<<"$line")"
  add "$label" db_mb "$(awk -v b="$(db_bytes "$dir")" 'BEGIN {printf "%.0f", b / 1e6}')"
  stop_daemon "$pid"

  start "$bin" "$label-$r-amp"
  dir=$tmp/$label-$r-amp/state
  a0=$(db_bytes "$dir")
  "$load" submit --socket "$sock" -n 1 --array 0-9999 --any-state --arg-bytes 20000 \
    --command /bin/sleep 3600 >/dev/null
  sleep 2
  add "$label" amp_mb "$(awk -v a="$a0" -v b="$(db_bytes "$dir")" 'BEGIN {printf "%.0f", (b - a) / 1e6}')"
  stop_daemon "$pid"
}

log "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPU(s), load $(cut -d' ' -f1-3 /proc/loadavg); $reps run(s), ${window}-s windows"
record "date=$(date -u +%FT%TZ) cpus=$(nproc) base=$base build=$build reps=$reps window=$window"
for r in $(seq "$reps"); do  # interleaved, so both builds see the same machine
  for label in baseline this; do
    bin=$build
    [ "$label" = baseline ] && bin=$base
    log "run $r: $label"
    one_run "$bin" "$label" "$r"
  done
done

row() {  # TITLE METRIC UNIT GOAL
  local b t
  b=$(median <<<"${M[baseline $2]:-}")
  t=$(median <<<"${M[this $2]:-}")
  printf '%-52s %12s %12s  %s\n' "$1" "$b $3" "$t $3" "$4 (runs: ${M[baseline $2]:-}| ${M[this $2]:-})"
}
echo
echo "== one user's flood, 4 emulated A100-40GB, time scale 60, policy carma; medians of $reps run(s)"
printf '%-52s %12s %12s  %s\n' "measure" "baseline" "this tree" "goal"
row "attempts started/s, 100 queued" start100 "/s" ""
row "attempts started/s, 100,000 queued" start100k "/s" "as fast as with 100 queued"
row "seconds to queue 100,000 (10 arrays of 10,000)" fill_s "s" ""
row "GET /v1/status p50, 100,000 queued" status_p50 "ms" ""
row "GET /v1/status p99, 100,000 queued" status_p99 "ms" "< 50 ms"
row "GET /v1/view p50" view_p50 "ms" ""
row "GET /v1/view p99" view_p99 "ms" "< 100 ms"
row "GET /v1/view size" view_kb "KiB" "< 1 MB"
row "daemon peak RSS after 3 concurrent whole timelines" timeline_hwm_mb "MB" "< 300 MB"
row "seconds for the 3 timelines" timeline_s "s" ""
row "database after the flood" db_mb "MB" ""
row "database growth, one 10,000 array with a 20 KB argument" amp_mb "MB" ""
