#!/bin/bash
# Submissions while the server's GPU list is refreshed: across nodes each tick replaces that list,
# and a submission read it without the daemon's lock to check what can ever fit, so a submit
# racing a tick read freed memory (ASan: heap-use-after-free in parse_submission; it crashed
# the server once under `cluster.user_agent`). Four clients submit 60 held tasks each while one
# agent reports every 20 ms; the server must answer every one and stay up.
# Usage: submit_race_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
source "$(dirname "$0")/../lib.sh" submit-race
logs=("$T/server.log" "$T/submit.err:10")
# Submitted as fast as the clients go: past the per-user rate a refusal would end the loop.
printf 'limits:\n  submit_rate_per_user: 100000\n  submit_burst_per_user: 100000\n' >"$T/config.yaml"
"$B/carma" serve --config "$T/config.yaml" --state-dir "$T/server" --socket "$T/carma.sock" \
    --policy carma --time-scale 60 --agents "127.0.0.1:$PORT" --agent-token-file "$T/token" \
    --node-timeout 5 >"$T/server.log" 2>&1 &
pids+=($!)
"$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node n1 \
    --gpus emulated:4xA100-40GB --state-dir "$T/n1" --time-scale 60 --allow-root-tasks \
    >"$T/agent.log" 2>&1 &
pids+=($!)
wait_for '[ "$(nodes_up)" = 1 ]' 150 || fail "the agent did not come up"
clients=()
for _ in 1 2 3 4; do
    (for _ in $(seq 60); do
        "$B/carma" submit --socket "$T/carma.sock" -H -- /bin/true >/dev/null 2>>"$T/submit.err" ||
            exit 1
    done) &
    clients+=($!)
done
failed=0
for c in "${clients[@]}"; do wait "$c" || failed=1; done
kill -0 "${pids[0]}" 2>/dev/null || fail "the server died during the submissions"
[ "$failed" = 0 ] || fail "a submission was not answered"
held=$(api "/v1/tasks?limit=1000" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tasks"]))')
[ "$held" = 240 ] || fail "$held of 240 held tasks stored"
echo "PASS 240 submissions across a refreshing GPU list, all answered and stored"
