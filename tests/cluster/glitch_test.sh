#!/bin/bash
# A node's filesystem hiccups: its agent's attempts directory is renamed away for 3 s while tasks
# run there (an NFS home that stops answering looks the same to the agent), then put back. The
# agent must report that it cannot list its attempts instead of an empty list, and the server
# must keep the tasks as they were: every task succeeds exactly once, none is recorded lost, and
# no GPU is handed out while its task still runs (policy exclusive: one task per GPU, so two
# attempts on one GPU at once would be a double placement). Also: a second agent started with
# the name of a live node is refused, naming the first agent's host, and the first keeps
# reporting; the agent streams logs to the server, so `carma logs` reads them from the server's
# copy; a root agent refuses tasks of uid 0 without --allow-root-tasks.
# Usage: glitch_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
source "$(dirname "$0")/../lib.sh" glitch
logs=("$T/server.log" "$T/agent.log:20")
"$B/carma" serve --state-dir "$T/server" --socket "$T/carma.sock" --policy exclusive \
    --time-scale 10 --window 3 --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
    --node-timeout 6 >"$T/server.log" 2>&1 &
pids+=($!)
start_agent() {  # LOG [FLAGS...]
    local log=$1
    shift
    "$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node n1 \
        --gpus emulated:4xA100-40GB --state-dir "$T/n1" --time-scale 10 "$@" >>"$log" 2>&1 &
    pids+=($!)
}
start_agent "$T/agent.log" --allow-root-tasks
wait_for node_up 150 || fail "the agent did not come up"
wait_for 'window_full 3 3' 150 || fail "the GPUs' monitor windows did not fill"
echo "PASS agent up, 4 GPUs sampled"

# The same node name again, from a second agent: refused while the first reports.
start_agent "$T/second.log"
second=$!
wait_for 'grep -q "already has a live agent" "$T/second.log"' 50 ||
    fail "the second agent of n1 was not refused: $(tail -3 "$T/second.log")"
grep -q "on host $(hostname)" "$T/second.log" || fail "the refusal does not name the first agent's host: $(grep -m1 'live agent' "$T/second.log")"
kill "$second"
wait "$second" 2>/dev/null
node_up || fail "n1 is not up after the second agent was refused"
echo "PASS a second agent named n1 is refused, naming the first one's host"

# The first six run until the test releases them: however slow the machine, they still run
# while the attempts directory is away.
submit() {  # NAME SECONDS|release
    local wait="sleep $2"
    [ "$2" = release ] && wait="while [ ! -e $T/release ]; do sleep 0.2; done"
    api /v1/tasks -X POST -H 'Content-Type: application/json' \
        -d "{\"name\": \"$1\", \"command\": [\"/bin/sh\", \"-c\", \"echo start $1; $wait; echo end $1\"], \"workdir\": \"/tmp\", \"memory_mib\": 1000}" |
        field 'd["id"]'
}
ids=()
for i in 1 2 3 4 5 6; do
    id=$(submit "t$i" release)
    [ -n "$id" ] || fail "submit t$i failed"
    ids+=("$id")
done
running() { api /v1/tasks | python3 -c 'import json,sys; print(sum(t["state"]=="running" for t in json.load(sys.stdin)["tasks"]))' 2>/dev/null; }
wait_for '[ "$(running)" = 4 ]' 100 || fail "4 tasks did not start (running: $(running))"
sleep 1
mv "$T/n1/attempts" "$T/n1/attempts.away"
sleep 3
mv "$T/n1/attempts.away" "$T/n1/attempts"
sleep 1
touch "$T/release"
echo "PASS the attempts directory was away for 3 s with 4 tasks running"
grep -q "cannot read the attempts directory" "$T/agent.log" || fail "the agent did not say it could not read its attempts"

done_all() { [ "$(api /v1/tasks | field 'len(d["tasks"])')" = 0 ]; }
wait_for done_all 300 || fail "tasks still waiting or running after 60 s"
PYTHONPATH="$(dirname "$0")" python3 - "$T" <<'PY' || fail "checks on the tasks failed"
import sys
from task_checks import check, load, ok, overlaps
detail = load(sys.argv[1])
check(f"6 tasks (got {len(detail)})", len(detail) == 6)
outcomes = {t["name"]: [a["outcome"] for a in t["attempt_list"]] for t in detail}
check(f"every task succeeded exactly once, in one attempt ({outcomes})",
      all(o == ["succeeded"] for o in outcomes.values()))
twice = overlaps(detail)
check(f"no GPU handed out while its task ran ({twice})", not twice)
sys.exit(0 if ok() else 1)
PY
echo "PASS every task succeeded once; no GPU was handed out twice"

# Logs came through the reports: the server's copy, not a path on the node.
out=$("$B/carma" logs "${ids[0]}" --socket "$T/carma.sock" 2>&1)
echo "$out" | grep -q "start t1" && echo "$out" | grep -q "end t1" ||
    fail "carma logs of t1 did not show its output: $out"
ls "$T/server/remote-logs/n1/" >/dev/null 2>&1 || fail "the server keeps no copy of the remote logs"
echo "PASS carma logs shows a remote task's output from the server's copy"

# The agent dies with a task running, and nothing outside Slurm can say whether the node is
# gone: past --node-timeout the node is unreachable and its task's state unknown, until root
# gives the node up with `carma nodes lost`, which ends the attempt lost and queues the task;
# an out-of-memory relaunch lost so goes back to the recovery queue it came from.
long=$(submit long 600)
long_state() { api "/v1/tasks/$long" | field 'd["state"]'; }
relaunch=$(api /v1/tasks -X POST -H 'Content-Type: application/json' -d '{"name": "relaunch",
    "command": ["/bin/sh", "-c", "if [ \"$CARMA_ATTEMPT\" = 1 ]; then echo \"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\" >&2; exit 1; fi; sleep 600"],
    "workdir": "/tmp", "memory_mib": 1000}' | field 'd["id"]')
[ -n "$relaunch" ] || fail "submit relaunch failed"
relaunch_state() { api "/v1/tasks/$relaunch" | field 'd["state"]'; }
# Running in the store comes before the node answers the launch; killed in between, the launch
# fails and the task is queued again, rightly. Placed is logged once the node has answered.
wait_for 'grep -q "task=$long placed: attempt" "$T/server.log"' 100 ||
    fail "the long task did not start (state $(long_state))"
wait_for 'grep -q "task=$relaunch placed: attempt 2 .*recovered from out-of-memory" "$T/server.log"' 150 ||
    fail "the relaunch task's second attempt did not start (state $(relaunch_state)): $(grep "task=$relaunch" "$T/server.log" | tail -3)"
pkill -9 -f -- "--node n1 --gpus emulated:4xA100-40GB --state-dir $T/n1"
node_state() { "$B/carma" nodes --json --socket "$T/carma.sock" | field 'd["nodes"][0]["state"]'; }
wait_for '[ "$(node_state)" = unreachable ]' 100 || fail "n1 did not become unreachable (state $(node_state))"
[ "$(long_state)" = unknown ] || fail "the task on the unreachable node shows $(long_state), not unknown"
"$B/carma" nodes --socket "$T/carma.sock" | grep -q "n1 .*unreachable" || fail "carma nodes does not show n1 unreachable"
"$B/carma" nodes lost n1 --socket "$T/carma.sock" || fail "carma nodes lost n1 failed"
wait_for 'case $(long_state) in queued|recovering) true;; *) false;; esac' 100 || fail "the long task was not queued again (state $(long_state))"
api "/v1/tasks/$long" | field '[a["outcome"] for a in d["attempt_list"]]' | grep -q "lost" ||
    fail "its attempt did not end lost: $(api /v1/tasks/$long)"
echo "PASS a silent node is unreachable, its task unknown; carma nodes lost ends it lost and queues it"
wait_for '[ "$(relaunch_state)" = recovering ]' 100 ||
    fail "the lost out-of-memory relaunch is not back in the recovery queue (state $(relaunch_state))"
api "/v1/tasks/$relaunch" | field '[a["outcome"] for a in d["attempt_list"]]' | grep -q "'out-of-memory', 'lost'" ||
    fail "its attempts did not end out-of-memory, then lost: $(api /v1/tasks/$relaunch)"
echo "PASS an out-of-memory relaunch lost with its node goes back to the recovery queue"
api "/v1/tasks/$long" -X DELETE >/dev/null
api "/v1/tasks/$relaunch" -X DELETE >/dev/null

# Without --allow-root-tasks, a root agent refuses a root task (the tasks here are root's).
if [ "$(id -u)" = 0 ]; then
    start_agent "$T/agent2.log"
    wait_for node_up 100 || fail "the restarted agent did not come up"
    id=$(submit root-task 1)
    state() { api "/v1/tasks/$id" | field 'd["state"]'; }
    wait_for '[ "$(state)" = failed ]' 150 || fail "a root task on an agent without --allow-root-tasks did not fail (state $(state))"
    api "/v1/tasks/$id" | grep -q "allow-root-tasks" || fail "the failure does not name --allow-root-tasks: $(api /v1/tasks/$id)"
    echo "PASS a root agent refuses a task of uid 0 without --allow-root-tasks"
else
    fail "needs root (CI runs as root): the agent's root rule is checked as root"
fi
echo "all checks passed"
