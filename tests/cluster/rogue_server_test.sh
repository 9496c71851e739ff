#!/bin/bash
# Whoever answers on the server's port cannot make an agent run anything: a program that binds
# the agents' port while CARMA is down (here a small Python server) answers every report with a
# launch of `touch PWNED` as root, unsigned, then signed with a key it does not have. The agent
# must run nothing, say why (once a minute, not once a report), and keep its tasks alone.
# Usage: rogue_server_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
source "$(dirname "$0")/../lib.sh" rogue-server
logs=("$T/agent.log:20" "$T/rogue.log:5")
cat >"$T/rogue.py" <<'PY'
import http.server, json, sys
port, pwned, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
request = {"argv": ["/bin/sh", "-c", "touch " + pwned], "workdir": "/tmp", "uid": 0, "gid": 0,
           "attempt_dir": "1-1", "env": [], "gpus": [0]}
class Rogue(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps({"version": 2, "period_s": 0.1, "commands": [
            {"type": "launch", "id": 1, "name": "1-1", "request": request}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if mode == "forged":
            self.send_header("X-Carma-Auth", "carma1 token ts=1700000000.000 mac=" + "ab" * 32)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        sys.stderr.write("rogue answered a report\n")
http.server.HTTPServer(("127.0.0.1", port), Rogue).serve_forever()
PY
for mode in unsigned forged; do
    python3 "$T/rogue.py" "$PORT" "$T/PWNED" "$mode" >>"$T/rogue.log" 2>&1 &
    rogue=$!
    pids+=($rogue)
    # Listening before the agent's first report: a refused one backs off past this test's wait.
    wait_for "grep -q ':$(printf %04X "$PORT") 00000000:0000 0A' /proc/net/tcp" 100 ||
        fail "the rogue server did not listen"
    "$B/carma" agent --server "127.0.0.1:$PORT" --token-file "$T/token" --node n1 \
        --gpus emulated:1xA100-40GB --state-dir "$T/n1" --time-scale 10 --allow-root-tasks \
        >>"$T/agent.log" 2>&1 &
    agent=$!
    pids+=($agent)
    sleep 5
    kill "$agent" "$rogue" 2>/dev/null
    wait "$agent" "$rogue" 2>/dev/null
    answered=$(grep -c "rogue answered" "$T/rogue.log")
    [ "$answered" -ge 1 ] || fail "the agent reported to the rogue server only $answered time(s)"
    [ -e "$T/PWNED" ] && fail "the agent ran the rogue server's launch ($mode answer)"
    [ -z "$(ls -A "$T/n1/attempts" 2>/dev/null)" ] || fail "the agent made an attempt for the rogue server: $(ls "$T/n1/attempts")"
    said=$(grep -c "does not prove it comes from the CARMA server" "$T/agent.log")
    [ "$said" -ge 1 ] || fail "the agent did not say why it ran nothing ($mode answer)"
    echo "PASS a rogue server's $mode launch is not run; answered $answered reports, the agent said so $said time(s)"
    : >"$T/rogue.log"
    : >"$T/agent.log"
done
[ "$said" -le 1 ] || fail "the agent said it $said times in 4 s; once a minute is enough"
echo "all checks passed"
