#!/usr/bin/env bash
# Benchmarks the `carma serve` daemon on 8 emulated A100-40GB GPUs (see bench/README.md, section
# "Daemon"):
#
#   1. idle CPU: daemons sampling at 1 Hz (time scale 1) with nothing queued or running, CPU
#      time (utime+stime of /proc/PID/stat) over CARMA_BENCH_CPU_SECONDS once every GPU's first
#      window has filled -> % of one core; CARMA_BENCH_CPU_RUNS daemons measured side by side;
#   2. memory: VmRSS right after start, once idle with 8 tasks running, then with
#      CARMA_BENCH_MEM_TASKS tasks queued (plus VmHWM), and after one GET /v1/tasks of them all;
#   3. submissions/s: POST /v1/tasks from 1 and from 4 concurrent clients (bench/submit_load,
#      api::ApiClient, one connection per request), N requests per run, CARMA_BENCH_REPS runs,
#      each run preceded by the same number of GET /healthz (the HTTP floor) for the ratio.
#
# Tasks that stay queued: the daemons use policy exclusive and first get 8 `/bin/sleep 3600`
# tasks, one per GPU; every later 1-GPU task then waits for an idle GPU. Everything this script
# starts (daemons, supervisors, sleeps) is stopped by pid on exit, and its temp dir removed.
#
#   bench/daemon_bench.sh            full: N=2000, 5 runs, 3 x 60 s idle CPU  (about 2.5 minutes)
#   bench/daemon_bench.sh --quick    N=500, 3 runs, 1 x 20 s idle CPU          (about 2 minutes)
#
# Environment: CARMA_BUILD_DIR (default build/), CARMA_BENCH_NO_BUILD=1 (use what is built),
# CARMA_BENCH_N, CARMA_BENCH_REPS, CARMA_BENCH_CPU_RUNS, CARMA_BENCH_CPU_SECONDS,
# CARMA_BENCH_MEM_TASKS override the figures above; CARMA_BENCH_KEEP=1 keeps the temp dir
# (daemon logs, state). Raw results go to $build/bench-results/daemon_bench.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${CARMA_BUILD_DIR:-$root/build}

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: bench/daemon_bench.sh [--quick]" >&2; exit 2 ;;
esac
if [ $quick = 1 ]; then
  n=500 reps=3 cpu_runs=1 cpu_seconds=20
else
  n=2000 reps=5 cpu_runs=3 cpu_seconds=60
fi
n=${CARMA_BENCH_N:-$n}
reps=${CARMA_BENCH_REPS:-$reps}
cpu_runs=${CARMA_BENCH_CPU_RUNS:-$cpu_runs}
cpu_seconds=${CARMA_BENCH_CPU_SECONDS:-$cpu_seconds}
mem_tasks=${CARMA_BENCH_MEM_TASKS:-10000}
gpus=emulated:8xA100-40GB
hz=$(getconf CLK_TCK)  # clock ticks per second in /proc/PID/stat
window=30  # the daemon's default window, in samples (1 per second at time scale 1)

# --- build -----------------------------------------------------------------------------------------
if [ "${CARMA_BENCH_NO_BUILD:-0}" != "1" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${CARMA_BUILD_TYPE:-Release}" \
    -DCARMA_BUILD_BENCH=ON >/dev/null
  cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target carma carma-shim submit_load \
    >/dev/null
fi
carma=$build/carma
load=$build/bench/submit_load
for f in "$carma" "$build/carma-shim" "$load"; do
  if [ ! -x "$f" ]; then
    echo "daemon_bench: $f is missing; build the targets carma, carma-shim and submit_load" >&2
    exit 1
  fi
done
type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ "$type" != "Release" ]; then
  echo "daemon_bench: $build is a '${type:-unknown}' build; figures are only meaningful for Release" >&2
fi

tmp=$(mktemp -d /tmp/carma-daemon-bench.XXXXXX)
out=$build/bench-results
mkdir -p "$out"
raw=$out/daemon_bench.txt
: >"$raw"
declare -A daemon_alive  # pid -> 1 while a daemon we started may run (never signal a reaped pid)
state_dirs=()

log() { echo "daemon_bench: $*" >&2; }
record() { echo "$*" >>"$raw"; }

# A pid's command line, NULs as spaces (empty once it is gone).
cmdline() { { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null || true; }
source "$root/bench/no_limits.sh"

stop_daemon() {  # PID: SIGTERM, then SIGKILL after 10 s
  local pid=$1 i
  [ -n "${daemon_alive[$pid]:-}" ] || return 0
  unset "daemon_alive[$pid]"
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

# The attempts a daemon launched run under their own supervisors and outlive it: kill each
# task's process group (task.pid), then its supervisor (shim.pid), checking that the pid still
# is what we started.
stop_attempts() {  # STATE_DIR
  local f pid
  for f in "$1"/attempts/*/*/task.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    case "$(cmdline "$pid")" in /bin/sleep*) kill -KILL -- "-$pid" 2>/dev/null || true ;; esac
  done
  for f in "$1"/attempts/*/*/shim.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    for _ in $(seq 50); do
      case "$(cmdline "$pid")" in *carma-shim*) sleep 0.1 ;; *) break ;; esac
    done
    case "$(cmdline "$pid")" in *carma-shim*) kill -TERM "$pid" 2>/dev/null || true ;; esac
  done
}

cleanup() {
  local pid d
  for pid in "${!daemon_alive[@]}"; do stop_daemon "$pid"; done
  for d in "${state_dirs[@]}"; do stop_attempts "$d"; done
  if [ "${CARMA_BENCH_KEEP:-0}" = "1" ]; then
    log "kept $tmp"
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_daemon NAME -> sets $sock and $pid; state in $tmp/NAME.
start_daemon() {
  local name=$1 i
  mkdir -p "$tmp/$name"
  sock=$tmp/$name/carma.sock
  # shellcheck disable=SC2046  # the config's path has no spaces
  "$carma" serve --gpus "$gpus" --state-dir "$tmp/$name/state" --socket "$sock" \
    --time-scale 1 --policy exclusive $(no_limits_args "$carma" "$tmp/$name") \
    >"$tmp/$name/daemon.log" 2>&1 &
  pid=$!
  daemon_alive[$pid]=1
  state_dirs+=("$tmp/$name/state")
  for i in $(seq 200); do
    if [ -S "$sock" ] && "$load" healthz --socket "$sock" -n 1 >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  log "daemon $name did not come up; its log:"
  cat "$tmp/$name/daemon.log" >&2
  exit 1
}

cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }  # utime + stime
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }   # VmRSS, VmHWM (kB)
mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {
  if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
  else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p"; }  # KEY=VALUE out of a submit_load line
last() { awk '{print $NF}' <<<"$1"; }
now() { date +%s.%N; }

# Submits 8 one-GPU sleeps (one per GPU under exclusive) and waits until all run.
fill_gpus() {
  "$load" submit --socket "$1" -n 8 -c 1 --command /bin/sleep 3600 >/dev/null
  "$load" wait-running --socket "$1" --count 8 --timeout 30
}

log "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPU(s), load average $(cut -d' ' -f1-3 /proc/loadavg), build $build ($type)"
log "N=$n runs=$reps, idle CPU ${cpu_runs} x ${cpu_seconds} s, memory with $mem_tasks queued; temp dir $tmp"
record "date=$(date -u +%FT%TZ) cpus=$(nproc) loadavg=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,) build=$build type=$type"

# --- 1. idle CPU ------------------------------------------------------------------------------------
log "idle CPU: starting $cpu_runs daemon(s), waiting for their first ${window}-s window"
cpu_pids=() cpu_socks=()
for i in $(seq "$cpu_runs"); do
  start_daemon "cpu$i"
  cpu_pids+=("$pid") cpu_socks+=("$sock")
done
for s in "${cpu_socks[@]}"; do
  "$load" wait-window --socket "$s" --samples "$window" --timeout $((window + 60))
done
sleep 2  # let the first decisions after the window fill pass

t_start=() w_start=$(now)
for p in "${cpu_pids[@]}"; do t_start+=("$(cpu_ticks "$p")"); done
log "idle CPU: measuring ${cpu_seconds} s"
sleep "$cpu_seconds"
w_end=$(now)
cpu_pcts=()
for i in "${!cpu_pids[@]}"; do
  p=${cpu_pids[$i]}
  t_end=$(cpu_ticks "$p")
  pct=$(awk -v a="${t_start[$i]}" -v b="$t_end" -v hz="$hz" -v w0="$w_start" -v w1="$w_end" \
    'BEGIN {printf "%.3f", (b - a) / hz / (w1 - w0) * 100}')
  cpu_pcts+=("$pct")
  wall=$(awk -v a="$w_start" -v b="$w_end" 'BEGIN {printf "%.2f", b - a}')
  record "idle_cpu run=$((i + 1)) ticks=$((t_end - ${t_start[$i]})) clk_tck=$hz wall_s=$wall" \
    "pct=$pct threads=$(status_kib "$p" Threads) rss_kib=$(status_kib "$p" VmRSS)"
  stop_daemon "$p"
done
cpu_med=$(echo "${cpu_pcts[*]}" | median)

# --- 2. memory and 3. submissions: two daemons, 8 sleeps each ---------------------------------------
log "memory/submissions: starting 2 daemons, waiting for their first window"
start_daemon mem
mem_pid=$pid mem_sock=$sock
rss_start=$(status_kib "$mem_pid" VmRSS)
start_daemon sub
sub_pid=$pid sub_sock=$sock
for s in "$mem_sock" "$sub_sock"; do
  "$load" wait-window --socket "$s" --samples "$window" --timeout $((window + 60))
  fill_gpus "$s"
done
sleep 2
rss_idle=$(status_kib "$mem_pid" VmRSS)
log "memory: submitting $mem_tasks tasks that stay queued"
line=$("$load" submit --socket "$mem_sock" -n "$mem_tasks" -c 4)
record "mem_submit $line"
sleep 3  # a few ticks with the full queue
queued=$("$load" status --socket "$mem_sock" | sed -n 's/.*"queued":\([0-9]*\).*/\1/p')
if [ "$queued" != "$mem_tasks" ]; then
  log "expected $mem_tasks queued tasks, the daemon says ${queued:-?}"
  exit 1
fi
rss_full=$(status_kib "$mem_pid" VmRSS)
hwm_full=$(status_kib "$mem_pid" VmHWM)
list=$("$load" list --socket "$mem_sock")
rss_list=$(status_kib "$mem_pid" VmRSS)
hwm_list=$(status_kib "$mem_pid" VmHWM)
# Seven more, one after the other: each is served by whichever of httplib's 8 pool threads is
# free, and what a thread's malloc arena grew to stays with the process.
for _ in $(seq 7); do "$load" list --socket "$mem_sock" >/dev/null; done
rss_list8=$(status_kib "$mem_pid" VmRSS)
hwm_list8=$(status_kib "$mem_pid" VmHWM)
record "memory rss_start_kib=$rss_start rss_idle_kib=$rss_idle queued=$queued" \
  "rss_queued_kib=$rss_full hwm_queued_kib=$hwm_full list: $list" \
  "rss_after_list_kib=$rss_list hwm_after_list_kib=$hwm_list" \
  "rss_after_8_lists_kib=$rss_list8 hwm_after_8_lists_kib=$hwm_list8"
stop_daemon "$mem_pid"

log "submissions: $reps run(s) of $n requests, 1 and 4 clients, each after $n GET /healthz"
"$load" healthz --socket "$sub_sock" -n 200 -c 1 >/dev/null  # warm-up
declare -A rates p50s p99s dcpu
for r in $(seq "$reps"); do
  for c in 1 4; do
    for mode in healthz submit; do
      t0=$(cpu_ticks "$sub_pid")
      line=$("$load" "$mode" --socket "$sub_sock" -n "$n" -c "$c")
      t1=$(cpu_ticks "$sub_pid")
      # The daemon's CPU time per request, in µs (clock ticks: 10 ms resolution at 100 Hz).
      us=$(awk -v t="$((t1 - t0))" -v hz="$hz" -v n="$n" \
        'BEGIN {printf "%.0f", t / hz / n * 1e6}')
      line="$line daemon_cpu_us_per_req=$us"
      record "run=$r $line"
      dcpu[$mode$c]+="$us "
      rates[$mode$c]+="$(echo "$line" | field rate) "
      p50s[$mode$c]+="$(echo "$line" | field p50_ms) "
      p99s[$mode$c]+="$(echo "$line" | field p99_ms) "
    done
  done
  log "  run $r: healthz/submit 1 client $(last "${rates[healthz1]}")/$(last "${rates[submit1]}")" \
    "req/s, 4 clients $(last "${rates[healthz4]}")/$(last "${rates[submit4]}") req/s"
done
sub_queued=$("$load" status --socket "$sub_sock" | sed -n 's/.*"queued":\([0-9]*\).*/\1/p')
record "submissions queue_at_end=$sub_queued"

# --- table ------------------------------------------------------------------------------------------
echo
echo "== carma serve, $gpus, policy exclusive, time scale 1" \
  "($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg); raw: $raw)"
printf '%-44s %14s  %s\n' "measure" "median" "runs / notes"
printf '%-44s %14s  %s\n' "idle CPU, 1 Hz sampling, nothing running" "$cpu_med % core" \
  "${cpu_pcts[*]} (${cpu_runs} x ${cpu_seconds} s; aim < 1 %)"
printf '%-44s %14s  %s\n' "RSS right after start" "$(mib "$rss_start") MiB" ""
printf '%-44s %14s  %s\n' "RSS idle, 8 tasks running, 0 queued" "$(mib "$rss_idle") MiB" ""
printf '%-44s %14s  %s\n' "RSS with $queued tasks queued" "$(mib "$rss_full") MiB" \
  "VmHWM $(mib "$hwm_full") MiB (aim < 100 MiB)"
printf '%-44s %14s  %s\n' "RSS after one GET /v1/tasks of them all" "$(mib "$rss_list") MiB" \
  "VmHWM $(mib "$hwm_list") MiB; $list"
printf '%-44s %14s  %s\n' "RSS after 8 such GETs, one after the other" "$(mib "$rss_list8") MiB" \
  "VmHWM $(mib "$hwm_list8") MiB"
latency() {  # KEY -> "p50 .. ms, p99 .. ms, daemon CPU .. µs/req" (medians over the runs)
  echo "p50 $(median <<<"${p50s[$1]}") ms, p99 $(median <<<"${p99s[$1]}") ms," \
    "daemon CPU $(median <<<"${dcpu[$1]}") µs/req"
}
for c in 1 4; do
  h=$(median <<<"${rates[healthz$c]}")
  s=$(median <<<"${rates[submit$c]}")
  ratio=$(awk -v s="$s" -v h="$h" 'BEGIN {printf "%.2f", s / h}')
  printf '%-44s %14s  %s\n' "GET /healthz, $c client(s)" "$(printf '%.0f' "$h") req/s" \
    "$(latency "healthz$c"); runs: ${rates[healthz$c]}"
  printf '%-44s %14s  %s\n' "POST /v1/tasks (stays queued), $c client(s)" \
    "$(printf '%.0f' "$s") req/s" "$ratio x healthz; $(latency "submit$c"); runs: ${rates[submit$c]}"
done
echo "(submission runs grew the daemon's queue from 0 to $sub_queued tasks)"
