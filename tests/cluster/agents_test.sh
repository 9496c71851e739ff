#!/bin/bash
# CARMA across two nodes without Slurm: a server in cluster mode (--agents) and two `carma agent`s
# with four emulated GPUs each, on this host. Replays the demo trace twice over (18 tasks on 8
# GPUs) and checks: every task succeeded exactly once; tasks shared a GPU on both nodes; an
# out-of-memory crash was relaunched; killing one agent with SIGKILL and starting it again lost
# nothing, and neither did killing the server and starting it again. Leaves no process behind.
# Usage: agents_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/../lib.sh" agents
SCALE=60
logs=("$T/server.log" "$T/agent-n1.log:15" "$T/agent-n2.log:15")

"$B/carma" serve --state-dir "$T/server" --socket "$T/carma.sock" --policy OR-MAGM \
    --time-scale $SCALE --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
    --node-timeout 5 >"$T/server.log" 2>&1 &
server_pid=$!
pids+=($!)
start_agent() {
    "$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node "$1" \
        --gpus emulated:4xA100-40GB --state-dir "$T/$1" --time-scale $SCALE --allow-root-tasks \
        >>"$T/agent-$1.log" 2>&1 &
    agent_pid[$1]=$!
    pids+=($!)
}
declare -A agent_pid
start_agent n1
start_agent n2

for i in $(seq 150); do
    up=$(nodes_up)
    [ "$up" = 2 ] && break
    sleep 0.2
done
[ "$up" = 2 ] || fail "the two agents did not come up"
gpus=$(api /v1/gpus | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["gpus"]))')
[ "$gpus" = 8 ] || fail "the server sees $gpus GPUs, not 8"
echo "PASS two agents up, 8 GPUs"

# The demo trace twice over: 18 tasks on 8 GPUs share GPUs on both nodes.
{ grep -v '^#' "$SRC/data/traces/demo.csv" | head -1
  grep -v '^#' "$SRC/data/traces/demo.csv" | tail -n +2 | sed 's/^\([0-9]*\),\([^,]*\),/\1,\2_a,/'
  grep -v '^#' "$SRC/data/traces/demo.csv" | tail -n +2 | sed 's/^\([0-9]*\),\([^,]*\),/\1,\2_b,/'
} > "$T/trace.csv"
"$B/carma" replay "$T/trace.csv" --socket "$T/carma.sock" --wait >"$T/replay.log" 2>&1 &
replay=$!
pids+=($replay)

# Once n1 runs something, kill its agent outright and start it again a little later.
for i in $(seq 300); do
    running=$(api /v1/nodes | python3 -c 'import json,sys; print([n["running"] for n in json.load(sys.stdin)["nodes"] if n["node"]=="n1"][0])')
    [ "$running" -ge 2 ] 2>/dev/null && break
    sleep 0.2
done
[ "$running" -ge 2 ] 2>/dev/null || fail "nothing ran on n1"
kill -9 "${agent_pid[n1]}"
sleep 3
start_agent n1
echo "PASS agent n1 killed with $running task(s) running and started again"

# Then the server: SIGKILL, and started again on the same state; the agents find it again.
sleep 2
kill -9 $server_pid
sleep 1
"$B/carma" serve --state-dir "$T/server" --socket "$T/carma.sock" --policy OR-MAGM \
    --time-scale $SCALE --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
    --node-timeout 5 >>"$T/server.log" 2>&1 &
pids+=($!)
for i in $(seq 300); do
    up=$(nodes_up)
    [ "$up" = 2 ] && break
    sleep 0.2
done
[ "$up" = 2 ] || fail "the agents did not report to the restarted server"
echo "PASS server killed with SIGKILL and started again; both agents report to it"

for i in $(seq 900); do
    kill -0 $replay 2>/dev/null || break
    sleep 0.2
done
kill -0 $replay 2>/dev/null && fail "the replay did not finish in 3 minutes"
# Its --wait may have given up while the server was away: wait for the tasks themselves.
for i in $(seq 900); do
    left=$(api "/v1/tasks" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tasks"]))' 2>/dev/null)
    [ "$left" = 0 ] && break
    sleep 0.2
done
[ "$left" = 0 ] || fail "$left task(s) still waiting or running after 3 minutes"

PYTHONPATH="$(dirname "$0")" python3 - "$T" <<'PY' || fail "checks on the tasks failed"
import sys
from task_checks import check, load, ok, overlaps
detail = load(sys.argv[1])
check(f"18 tasks submitted (got {len(detail)})", len(detail) == 18)
bad = [t["name"] for t in detail if t["state"] != "succeeded"]
check(f"every task succeeded (not: {bad})", not bad)
twice = [t["name"] for t in detail if sum(a["outcome"] == "succeeded" for a in t["attempt_list"]) != 1]
check(f"each exactly one successful attempt (not: {twice})", not twice)
shared = {node for node, _, _, _ in overlaps(detail)}
check(f"tasks shared a GPU on both nodes (on: {sorted(shared)})", shared == {"n1", "n2"})
oom = [t["name"] for t in detail if any(a["outcome"] == "out-of-memory" for a in t["attempt_list"])]
check(f"an out-of-memory crash was relaunched and succeeded ({oom})", len(oom) >= 1)
nodes = {a["node"] for t in detail for a in t["attempt_list"]}
check(f"attempts name their node ({sorted(nodes)})", nodes == {"n1", "n2"})
sys.exit(0 if ok() else 1)
PY
echo "all checks passed"
