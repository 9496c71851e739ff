# The shell tests' library (source it after `set -u`): a private work folder $T under /tmp, the
# processes started in it ($pids, ended by stop_started on exit), the agents' token and a free
# port ($T/token, $PORT), failing with the logs that explain it (fail, $logs), polling (wait_for),
# and reading the server's API (api, field, nodes_up, window_full).
# Usage: source tests/lib.sh NAME   (the work folder is /tmp/carma-NAME.XXXXXX)
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

# fail MESSAGE: says why, then the last lines of each log named in $logs ("PATH" or
# "PATH:LINES", 30 lines by default), a sanitizer's report in one first, and exits 1.
logs=()
fail() {
    echo "FAIL: $*"
    local entry path lines
    for entry in "${logs[@]}"; do
        path=${entry%:*}
        lines=${entry##*:}
        [ "$path" = "$entry" ] && lines=30
        echo "--- ${path#"$T"/}"
        # A sanitizer's report starts long before a log's tail, which holds only its shadow map.
        grep -m 2 -A 40 -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$path" 2>/dev/null &&
            echo "--- ${path#"$T"/} (tail)"
        tail -n "$lines" "$path" 2>/dev/null
    done
    exit 1
}

# wait_for CONDITION TRIES: evaluates CONDITION every 0.2 s until it holds (status 0) or TRIES
# tries have passed (status 1).
wait_for() {
    for _ in $(seq "$2"); do eval "$1" && return 0; sleep 0.2; done
    return 1
}

# field EXPR: EXPR of the JSON on stdin, bound to d (`api /v1/tasks | field 'len(d["tasks"])'`).
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)" 2>/dev/null; }

api() { curl -sf --unix-socket "$T/carma.sock" "http://localhost$1" "${@:2}"; }
# How many nodes the server has `up`.
nodes_up() {
    api /v1/nodes 2>/dev/null |
        python3 -c 'import json,sys; print(sum(n["state"]=="up" for n in json.load(sys.stdin)["nodes"]))' 2>/dev/null
}
node_up() { [ "$(nodes_up)" = 1 ]; }
# window_full GPU SAMPLES: the monitor window of GPU (its index in /v1/gpus) holds SAMPLES.
window_full() { [ "$(api /v1/gpus | field "d[\"gpus\"][$1][\"window\"][\"samples\"]")" = "$2" ]; }

head -c 32 /dev/urandom | base64 | tr -d '\n=' > "$T/token"
chmod 600 "$T/token"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
