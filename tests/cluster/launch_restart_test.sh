#!/bin/bash
# A server in cluster mode that dies while it waits for a node to take a launch: the attempt is
# recorded, its agent never received it. Started again, the server must see from the agent's
# reports that nothing ran, end the attempt `not-started` and queue the task again (not record it
# lost for good); the task then runs and succeeds once.
# The agent is stopped (SIGSTOP) around the submission so the launch cannot reach it; real time
# (--time-scale 1) leaves a few seconds between the placement and the server's kill.
# Usage: launch_restart_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
source "$(dirname "$0")/../lib.sh" launch-restart
agent=
# A stopped agent would not take its SIGTERM.
trap '[ -n "$agent" ] && kill -CONT "$agent" 2>/dev/null; stop_started' EXIT
logs=("$T/server.log" "$T/agent.log:15")
serve() {
    "$B/carma" serve --state-dir "$T/server" --socket "$T/carma.sock" --policy OR-MAGM \
        --window 3 --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
        --node-timeout 60 >>"$T/server.log" 2>&1 &
    server_pid=$!
    pids+=($!)
}
serve
"$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node n1 \
    --gpus emulated:1xA100-40GB --state-dir "$T/n1" --allow-root-tasks >>"$T/agent.log" 2>&1 &
agent=$!
pids+=($agent)
wait_for node_up 150 || fail "the agent did not come up"
wait_for 'window_full 0 3' 150 || fail "the GPU's monitor window did not fill"
echo "PASS agent up, its GPU sampled"

# The agent stops taking reports' answers; the server places the task and waits for the launch.
kill -STOP "$agent"
id=$(api /v1/tasks -X POST -H 'Content-Type: application/json' \
    -d '{"name": "after-restart", "command": ["/bin/sh", "-c", "sleep 1"], "workdir": "/tmp"}' |
    field 'd["id"]')
[ -n "$id" ] || fail "submit failed"
task_state() { api "/v1/tasks/$id" | field 'd["state"]'; }
wait_for '[ "$(task_state)" = running ]' 25 || fail "task $id was not placed (state $(task_state))"
kill -9 "$server_pid"
sleep 0.5
kill -CONT "$agent"
echo "PASS server killed while it waited for n1 to take task $id's launch"

serve
wait_for node_up 150 || fail "the agent did not report to the restarted server"
wait_for '[ "$(task_state)" = succeeded ]' 150 || fail "task $id did not succeed (state $(task_state))"
api "/v1/tasks/$id" > "$T/task.json"
python3 - "$T/task.json" <<'PY' || fail "checks on task $id failed"
import json, sys
t = json.load(open(sys.argv[1]))
outcomes = [a["outcome"] for a in t["attempt_list"]]
ok = True
def check(name, cond):
    global ok
    print(("PASS " if cond else "FAIL ") + name)
    ok = ok and cond
check(f"the unreceived launch ended not-started, then one attempt succeeded ({outcomes})",
      outcomes == ["not-started", "succeeded"])
check(f"both attempts on n1 ({[a['node'] for a in t['attempt_list']]})",
      all(a["node"] == "n1" for a in t["attempt_list"]))
sys.exit(0 if ok else 1)
PY
api "/v1/events?task=$id" | grep -q "never received attempt 1" || fail "no event says why it was queued again"
echo "PASS the event says the node never received the launch"
echo "all checks passed"
