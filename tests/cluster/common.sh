# Shared by the cluster shell tests (source it after `set -u`): a private work folder $T under
# /tmp, the processes started in it ($pids, ended by stop_started on exit), the agents' token and
# a free port ($T/token, $PORT), and reading the server's API (api, nodes_up).
# Usage: source common.sh NAME   (the work folder is /tmp/carma-NAME.XXXXXX)
T=$(mktemp -d "/tmp/carma-$1.XXXXXX")
pids=()
# Started processes get SIGTERM, then SIGKILL; what is left of the fake jobs (their supervisors
# are detached on purpose) is found by the work folder in their command lines.
stop_started() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    sleep 0.5
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
    pkill -9 -f "$T/" 2>/dev/null
    rm -rf "$T"
}
trap stop_started EXIT

api() { curl -sf --unix-socket "$T/carma.sock" "http://localhost$1" "${@:2}"; }
# How many nodes the server has `up`.
nodes_up() {
    api /v1/nodes 2>/dev/null |
        python3 -c 'import json,sys; print(sum(n["state"]=="up" for n in json.load(sys.stdin)["nodes"]))' 2>/dev/null
}

head -c 32 /dev/urandom | base64 | tr -d '\n=' > "$T/token"
chmod 600 "$T/token"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
