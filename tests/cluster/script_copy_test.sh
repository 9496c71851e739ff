#!/bin/bash
# A batch script's copy across nodes: `carma submit SCRIPT` sends the script's text with the task,
# the server hands it to the agent in the launch request, and the agent's shim runs it, not the
# file as it is by then. A held script is edited before its release; the task, run on the agent's
# node, prints what was submitted.
# Usage: script_copy_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
source "$(dirname "$0")/../lib.sh" script-copy
logs=("$T/server.log" "$T/agent.log:15")
"$B/carma" serve --state-dir "$T/server" --socket "$T/carma.sock" --policy carma \
    --time-scale 60 --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
    --node-timeout 5 >"$T/server.log" 2>&1 &
pids+=($!)
"$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node n1 \
    --gpus emulated:2xA100-40GB --state-dir "$T/n1" --time-scale 60 --allow-root-tasks \
    >"$T/agent.log" 2>&1 &
pids+=($!)
wait_for '[ "$(nodes_up)" = 1 ]' 150 || fail "the agent did not come up"

mkdir -p "$T/work"
printf '#!/bin/sh\n#SBATCH -J copied\necho "as submitted, $1"\n' >"$T/work/train.sh"
id=$(cd "$T/work" && "$B/carma" submit --socket "$T/carma.sock" --json -H train.sh one |
    field 'd["id"]')
[ -n "$id" ] || fail "the script was not submitted"
printf '#!/bin/sh\necho edited after submit\n' >"$T/work/train.sh"
"$B/carma" release --socket "$T/carma.sock" "$id" >/dev/null || fail "task $id was not released"
wait_for '[ "$(api /v1/tasks/$id | field "d[\"state\"]")" = succeeded ]' 600 ||
    fail "task $id did not succeed: $(api "/v1/tasks/$id")"
node=$(api "/v1/tasks/$id" | field 'd["attempt_list"][-1]["node"]')
[ "$node" = n1 ] || fail "task $id ran on '$node', not on the agent's node n1"
out=$("$B/carma" logs --socket "$T/carma.sock" "$id")
[ "$out" = "as submitted, one" ] || fail "task $id printed '$out', not the script as submitted"
echo "PASS a held script edited before its release ran as submitted on the agent's node"
