#!/usr/bin/env bash
# Checks that two builds of `carma` make the same `carma` decisions: for each case it simulates
# the trace under `--policy carma` with both binaries and compares the whole JSON result (every
# figure at full precision) and the per-task CSV (start, end, GPUs, attempts of every task).
# A speed-up of the policy must leave both byte-identical (the JSON: every key both have, at full
# precision; a key only one build writes, such as issue 23's per_user, is left out). Prints one
# line per case and the wall time of each binary; exits 1 if any case differs (the two files are
# kept for `diff`).
#
#   bench/carma_same_decisions.sh BASE_CARMA NEW_CARMA [--full]
#
# --full adds the large backlogs (gen:4000,gap=2 on 16x4, gen:20000), which take minutes with
# a binary from before the speed-up.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  echo "usage: $0 BASE_CARMA NEW_CARMA [--full]" >&2
  exit 2
fi
base=$1 new=$2 full=${3:-}
out=$(mktemp -d "${TMPDIR:-/tmp}/carma-same.XXXXXX")

cases=(
  "--trace t1"
  "--trace t2"
  "--trace mix-90"
  "--trace heavy-60"
  "--trace t1 --history warm"
  "--trace t2 --history warm"
  "--trace mix-90 --history warm"
  "--trace heavy-60 --history warm"
  "--trace heavy-60 --memory-limits"
  "--trace mix-90 --sharing timeslice"
  "--trace t1 --noise 0.05"
  "--trace gen:400,gap=60 --seed 1"
  "--trace gen:400,gap=60 --seed 2"
  "--trace gen:400,gap=60 --seed 3"
  "--trace gen:400,gap=60 --seed 1 --history warm"
  "--trace gen:300,gap=200,multi=0.2 --gpus 4x4xA100-40GB"
  "--trace gen:2000"
  "--trace gen:2000 --history warm"
)
# The world of issue 19's goal table: measured pair speeds, biased and noisy, so the speed
# correction learns (and the predictions it corrects change) during the run.
world="--world measured --world-bias 0.25 --world-noise 0.1"
for trace in t1 t2 mix-90 heavy-60; do
  cases+=("--trace $trace $world" "--trace $trace $world --history warm")
done
cases+=("--trace gen:400,gap=60 --seed 1 $world" "--trace gen:2000 $world")
if [[ $full == --full ]]; then
  cases+=("--trace gen:4000,gap=2 --gpus 16x4xA100-40GB" "--trace gen:20000")
fi

now() { date +%s.%N; }
# The JSON of both, byte for byte, once the keys one of them lacks are left out of both: a build
# that adds figures (issue 23's per_user and jain_index) still has to agree on every other one.
same_json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def common(x, y):
    if isinstance(x, dict) and isinstance(y, dict):
        keys = x.keys() & y.keys()
        return ({k: common(x[k], y[k])[0] for k in keys}, {k: common(x[k], y[k])[1] for k in keys})
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        pairs = [common(u, v) for u, v in zip(x, y)]
        return [p[0] for p in pairs], [p[1] for p in pairs]
    return x, y
x, y = common(a, b)
sys.exit(0 if json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True) else 1)
PY
}
status=0
i=0
for c in "${cases[@]}"; do
  i=$((i + 1))
  read -ra args <<<"$c"
  for which in base new; do
    bin=$base
    [[ $which == new ]] && bin=$new
    t0=$(now)
    "$bin" simulate "${args[@]}" --policy carma --quiet --json --tasks "$out/$i.$which.csv" \
      >"$out/$i.$which.json"
    t1=$(now)
    printf -v "t_$which" '%.2f' "$(echo "$t1 - $t0" | bc)"
  done
  if same_json "$out/$i.base.json" "$out/$i.new.json" && cmp -s "$out/$i.base.csv" "$out/$i.new.csv"; then
    verdict=same
  else
    verdict=DIFFERENT
    status=1
  fi
  printf '%-10s %-55s base %7ss  new %7ss\n' "$verdict" "$c" "$t_base" "$t_new"
done
if [[ $status -eq 0 ]]; then
  rm -rf "$out"
else
  echo "differences kept in $out (N.base.json / N.new.json, N.base.csv / N.new.csv)"
fi
exit $status
