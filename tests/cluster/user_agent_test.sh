#!/bin/bash
# An agent that is not root (a user's `carma agent`, as under their own Slurm allocation) can
# start only that user's tasks. The server must keep other users' tasks off its node instead of
# placing them there to fail: two nodes of one GPU each, n1's agent run by a throwaway user and
# n2's by root. Root's two exclusive tasks go to n2 one after the other (the second waits with
# n1's agent named, and never fails); the node user's task runs on n1.
# Needs root (useradd, runuser). Usage: user_agent_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
source "$(dirname "$0")/../lib.sh" user-agent
logs=("$T/server.log" "$T/agent-n1.log:15" "$T/agent-n2.log:15")
[ "$(id -u)" = 0 ] || fail "needs root to create a user and run an agent as it (CI runs as root)"
U=carma-test-nodeuser
id -u "$U" >/dev/null 2>&1 || useradd --no-create-home --shell /usr/sbin/nologin "$U" ||
    fail "useradd could not create $U"
# The user's agent needs the programs, its token and the socket's folder where it can reach them
# (the build may sit in a folder only root can enter).
chmod 755 "$T"
mkdir -p "$T/bin" "$T/n1"
cp "$B/carma" "$B/carma-daemon" "$B/carma-shim" "$T/bin/"
chmod 755 "$T/bin" "$T/bin/"*
cp "$T/token" "$T/n1-token"
chown "$U" "$T/n1-token" "$T/n1"
chmod 600 "$T/n1-token"

"$B/carma" serve --state-dir "$T/server" --socket "$T/carma.sock" --policy carma \
    --time-scale 60 --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
    --node-timeout 5 >"$T/server.log" 2>&1 &
pids+=($!)
runuser -u "$U" -- "$T/bin/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/n1-token" \
    --node n1 --gpus emulated:1xA100-40GB --state-dir "$T/n1" --time-scale 60 \
    >>"$T/agent-n1.log" 2>&1 &
pids+=($!)
"$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node n2 \
    --gpus emulated:1xA100-40GB --state-dir "$T/n2" --time-scale 60 --allow-root-tasks \
    >>"$T/agent-n2.log" 2>&1 &
pids+=($!)
wait_for '[ "$(nodes_up)" = 2 ]' 150 || fail "the two agents did not come up"
wait_for 'window_full 0 30 && window_full 1 30' 300 || fail "the GPUs' windows did not fill"
chmod 666 "$T/carma.sock"
echo "PASS two agents up: n1 run by $U, n2 by root"

submit() {  # submit USER NAME: an exclusive task that sleeps; prints its id
    runuser -u "$1" -- "$T/bin/carma" submit --socket "$T/carma.sock" --json --exclusive \
        -J "$2" -D /tmp -- sleep 600 | field 'd["id"]'
}
state() { api "/v1/tasks/$1" | field 'd["state"]'; }
node() { api "/v1/tasks/$1" | field '(d.get("attempt_list") or [{}])[-1].get("node")'; }

first=$(submit root first)
[ -n "$first" ] || fail "root's first task was not accepted"
wait_for '[ "$(state "$first")" = running ]' 150 || fail "root's first task did not start: $(api "/v1/tasks/$first")"
[ "$(node "$first")" = n2 ] || fail "root's first task runs on $(node "$first"), not n2"
second=$(submit root second)
wait_for 'api "/v1/tasks/$second" | grep -q "agent runs as $U"' 150 ||
    fail "root's second task does not say why n1 cannot take it: $(api "/v1/tasks/$second")"
[ "$(state "$second")" = queued ] || fail "root's second task is $(state "$second"), not queued: $(api "/v1/tasks/$second")"
echo "PASS root's second task waits for n2 and names n1's agent"

own=$(submit "$U" own)
[ -n "$own" ] || fail "$U's task was not accepted"
wait_for '[ "$(state "$own")" = running ]' 150 || fail "$U's task did not start: $(api "/v1/tasks/$own")"
[ "$(node "$own")" = n1 ] || fail "$U's task runs on $(node "$own"), not n1"
echo "PASS $U's own task runs on n1"

api "/v1/tasks/$first" -X DELETE >/dev/null || fail "cannot cancel task $first"
wait_for '[ "$(state "$second")" = running ]' 150 || fail "root's second task did not start once n2 was free: $(api "/v1/tasks/$second")"
[ "$(node "$second")" = n2 ] || fail "root's second task runs on $(node "$second"), not n2"
for id in "$second" "$own"; do
    [ "$(state "$id")" = running ] || fail "task $id is $(state "$id"): $(api "/v1/tasks/$id")"
done
echo "PASS no task was failed for being placed on another user's agent"
echo "all checks passed"
