#!/usr/bin/env bash
# Issue 19, item 8: how long `carma simulate --policy carma` takes on a backlog, against
# oracle-MAGM on the same trace in the same run. A shared machine's load moves whole runs by tens
# of percent, so each case runs ROUNDS times with the binaries alternating (oracle-MAGM, then
# `carma` of each build given) and reports the median CPU time (user + sys) of each, and the
# ratio of the medians to oracle-MAGM's.
#
#   bench/carma_scale_bench.sh ROUNDS NEW_CARMA [BASE_CARMA]
#
# oracle-MAGM runs with NEW_CARMA (the policy is not touched by this work). With BASE_CARMA,
# `carma` of that build runs too, between the two, for a before/after in the same run.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 ROUNDS NEW_CARMA [BASE_CARMA]" >&2
  exit 2
fi
rounds=$1 new=$2 base=${3:-}

cases=(
  "--trace gen:2000"
  "--trace gen:4000,gap=2 --gpus 16x4xA100-40GB"
  "--trace gen:20000"
)

cpu_s() {  # the CPU time of one simulation, in seconds
  local out
  out=$({ /usr/bin/time -f '%U %S' "$@" --quiet >/dev/null; } 2>&1 | tail -1)
  echo "$out" | awk '{ printf "%.3f", $1 + $2 }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf '%-48s %12s %12s %12s %9s %9s\n' case oracle-MAGM "carma base" "carma new" base/MAGM new/MAGM
for c in "${cases[@]}"; do
  read -ra args <<<"$c"
  magm=() old=() now=()
  for ((r = 0; r < rounds; r++)); do
    magm+=("$(cpu_s "$new" simulate "${args[@]}" --policy oracle-MAGM)")
    if [[ -n $base ]]; then
      old+=("$(cpu_s "$base" simulate "${args[@]}" --policy carma)")
    fi
    now+=("$(cpu_s "$new" simulate "${args[@]}" --policy carma)")
  done
  m=$(median "${magm[@]}") n=$(median "${now[@]}") b=-
  [[ -n $base ]] && b=$(median "${old[@]}")
  ratio() { [[ $1 == - ]] && echo - || echo "$1 $m" | awk '{ printf "%.2fx", $1 / $2 }'; }
  printf '%-48s %11ss %11ss %11ss %9s %9s\n' "$c" "$m" "$b" "$n" "$(ratio "$b")" "$(ratio "$n")"
  echo "  runs: oracle-MAGM ${magm[*]} | carma base ${old[*]:-} | carma new ${now[*]}"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
