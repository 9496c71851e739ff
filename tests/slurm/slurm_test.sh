#!/usr/bin/env bash
# CARMA inside a Slurm allocation, end to end (issue 11), on a private two-node Slurm started
# here (tests/slurm/lab.sh: two slurmd, 4 fake GPUs each):
#   carma serve in cluster mode -> carma slurm up --nodes 2 --gpus-per-node 4 (one carma agent
#   per node, emulated GPUs) -> both nodes up -> eight long carma-fakejob tasks -> one agent
#   killed with SIGKILL mid-run and started again in the allocation -> eight more that pair up
#   with them, and one that crashes out of memory beside a co-runner -> every task succeeded
#   exactly once, collocation on both nodes, the OOM crash relaunched -> carma slurm down ends the
#   allocation -> teardown leaves no daemon running.
# Needs root (slurmd) and Slurm + munge (scripts/setup). When Slurm cannot start, this FAILS with
# the reason: it never skips. Prints one line `N passed, M failed`; exit 0 only when M is 0.
#
# usage: tests/slurm/slurm_test.sh BIN_DIR   (the directory of carma, carma-daemon, carma-shim,
#        carma-fakejob). KEEP=1 keeps the work directory (logs, state) for a post-mortem.
set -u

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$(cd "${1:?usage: $0 BIN_DIR}" && pwd)
CARMA=$BIN/carma
TIME_SCALE=${TIME_SCALE:-60}
WAIT_S=${WAIT_S:-60}

# The shell tests' library: the work folder $T (with the socket path its `api` reads), a free
# port $PORT, `field`. Its cleanup trap is replaced by this test's own below (finish), which
# also tears the Slurm lab down and counts checks instead of stopping at the first.
# shellcheck source=../lib.sh
source "$HERE/../lib.sh" slurm-test
WORK=$T
chmod 755 "$WORK"
LAB=$WORK/lab
SOCK=$WORK/carma.sock
pass=0
fail=0
SERVE_PID=""
RESTARTED_PID=""
JOB=""
torn_down=0

say() { echo "slurm_test: $*"; }
check() {
    local name=$1
    shift
    if "$@"; then
        echo "PASS $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name"
        fail=$((fail + 1))
    fi
}
alive() {
    [ -n "${1:-}" ] && [ -e "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}
# Processes started for this lab: everything Slurm ran inherits SLURM_CONF=$LAB/slurm.conf.
lab_processes() {
    local p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] && continue
        if alive "$p" && tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_CONF=$LAB/slurm.conf"; then
            echo "$p"
        fi
    done
}
stop_pid() {
    local p=$1 i
    alive "$p" || return 0
    kill "$p" 2>/dev/null
    for ((i = 0; i < 100; i++)); do alive "$p" || return 0; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    for ((i = 0; i < 30; i++)); do alive "$p" || return 0; sleep 0.1; done
    return 1
}
tail_logs() {
    local f
    for f in "$WORK"/serve.log "$WORK"/agents-*.out "$WORK"/agent-n1-restarted.log; do
        [ -s "$f" ] || continue
        echo "---- tail of $f"
        tail -n 15 "$f"
    done
}

# The PIDs the lab's daemons had, read before `down` removes their PID files.
daemon_pids() {
    local f
    for f in "$LAB"/run/*.pid; do
        [ -s "$f" ] && echo "$(tr -dc '0-9' <"$f")"
    done
}

teardown() {
    [ $torn_down = 1 ] && return
    torn_down=1
    local pids p left=""
    pids="$(daemon_pids) $SERVE_PID $RESTARTED_PID"
    [ -n "$RESTARTED_PID" ] && stop_pid "$RESTARTED_PID"
    [ -n "$SERVE_PID" ] && stop_pid "$SERVE_PID"
    if [ -f "$LAB/slurm.conf" ]; then
        "$HERE/lab.sh" down "$LAB" >"$WORK/lab-down.log" 2>&1 || cat "$WORK/lab-down.log"
    fi
    for p in $pids $(lab_processes); do
        alive "$p" && left="$left $p($(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-60))"
    done
    check "teardown leaves no daemon, agent or task running${left:+ (left:$left)}" [ -z "$left" ]
    # Whatever a failed run left behind is ours: do not let it outlive the test.
    for p in $(lab_processes); do kill -9 "$p" 2>/dev/null; done
}

finish() {
    teardown
    [ $fail = 0 ] || tail_logs
    if [ "${KEEP:-0}" = 1 ] || [ $fail != 0 ]; then
        say "kept $WORK"
    else
        rm -rf "$WORK"
    fi
    echo "$pass passed, $fail failed"
    [ $fail = 0 ]
}
trap 'finish; exit $?' EXIT
trap 'exit 1' INT TERM

# A check that cannot go on: counted, then the rest is skipped and teardown runs.
fatal() {
    echo "FAIL $*"
    fail=$((fail + 1))
    exit 1
}

# ---- the cluster -------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || fatal "needs root (slurmd runs jobs as their users); run as root"
for p in carma carma-daemon carma-shim carma-fakejob; do
    [ -x "$BIN/$p" ] || fatal "$BIN/$p is missing: build the carma, carma-daemon, carma-shim and carma-fakejob targets"
done
if ! "$HERE/lab.sh" up "$LAB" >"$WORK/lab-up.log" 2>&1; then
    cat "$WORK/lab-up.log"
    fatal "Slurm could not start (see the reason above; scripts/setup installs Slurm and munge)"
fi
check "two-node Slurm lab up (n1, n2 idle)" true
# shellcheck disable=SC1091
. "$LAB/env.sh"
export PATH=$BIN:$PATH:/usr/sbin
# Agents keep their state under $HOME: a private one, carried into the allocation by sbatch.
export HOME=$WORK/home
mkdir -p "$HOME"
unset CARMA_SOCKET

# ---- the server --------------------------------------------------------------------------------
# Agents and server prove who they are through the lab's munged, as on a real Slurm cluster.
"$CARMA" serve --state-dir "$WORK/state" --socket "$SOCK" --agents "127.0.0.1:$PORT" \
    --agent-auth munge --munge-socket "$LAB_MUNGE_SOCKET" --policy OR-MAGM --time-scale "$TIME_SCALE" \
    >"$WORK/serve.log" 2>&1 &
SERVE_PID=$!
up=0
for ((i = 0; i < 200; i++)); do
    if "$CARMA" slurm status --json --socket "$SOCK" 2>/dev/null | grep -q '"nodes": \['; then
        up=1
        break
    fi
    alive "$SERVE_PID" || break
    sleep 0.1
done
[ $up = 1 ] || { tail -n 20 "$WORK/serve.log"; fatal "carma serve --agents 127.0.0.1:$PORT did not answer GET /v1/nodes within 20 s"; }
check "carma serve in cluster mode answers GET /v1/nodes" true
nodes_auth() { api /v1/nodes | field 'd["auth"]'; }
check "the server authenticates agents with MUNGE (GET /v1/nodes says auth munge)" \
    [ "$(nodes_auth)" = munge ]

# ---- carma slurm up ----------------------------------------------------------------------------
out=$("$CARMA" slurm up --nodes 2 --gpus-per-node 4 --gpus emulated:4xA100-40GB --time 10 \
    --munge-socket "$LAB_MUNGE_SOCKET" --output "$WORK/agents-%j.out" --socket "$SOCK" --allow-root-tasks 2>&1)
echo "$out"
JOB=$(sed -n 's/^Slurm job \([0-9][0-9]*\):.*/\1/p' <<<"$out")
[ -n "$JOB" ] || fatal "carma slurm up printed no job id"
check "carma slurm up submitted allocation $JOB" true

status_json() { "$CARMA" slurm status --json --socket "$SOCK" 2>/dev/null; }
# nodes_in STATE: how many nodes of the allocation the daemon has in STATE.
nodes_in() {
    status_json | python3 -c '
import json, sys
doc = json.load(sys.stdin)
job, state = sys.argv[1], sys.argv[2]
print(sum(1 for a in doc["allocations"] if a["job"] == job for n in a["carma_nodes"] if n.get("state") == state))
' "$JOB" "$1" 2>/dev/null || echo 0
}
wait_nodes_up() {
    local want=$1 i
    for ((i = 0; i < WAIT_S * 2; i++)); do
        [ "$(nodes_in up)" = "$want" ] && return 0
        sleep 0.5
    done
    return 1
}
if ! wait_nodes_up 2; then
    "$CARMA" slurm status --socket "$SOCK"
    squeue
    fatal "the two agents did not both come up within ${WAIT_S}s"
fi
check "both nodes up in carma slurm status" true
"$CARMA" slurm status --socket "$SOCK"

# ---- the trace ---------------------------------------------------------------------------------
# Eight long tasks take the eight GPUs alone. Once n1's agent has been killed and is back (below),
# eight more are submitted and pair up with them, so both nodes collocate (submitted while n1 is
# away they could all go to n2). The long tasks are MobileNet (SMACT 0.64), which the paper's risk
# filter lets others join (ResNet-50's 0.80 SMACT with 0.50 DRAMA would be HIGH). Then `bigjob`
# (32 GB): under OR-MAGM (no memory information) it is put beside others, crashes out of memory
# past the A100's 40 GB and is relaunched alone once a GPU is idle. It comes last because a
# recovering task holds the paper's main queue until then: before the pairs, it would keep them
# from ever sharing.
TRACE=$WORK/trace.csv
PACK_TRACE=$WORK/pack.csv
HEADER="submit_offset_s,task_name,model,batch_size,gpus,standalone_minutes,memory_gb,epochs,class"
{
    echo "$HEADER"
    for i in 1 2 3 4 5 6 7 8; do echo "0,fill$i,mobilenet_v2,128,1,40,11.34,1,medium"; done
} >"$TRACE"
{
    echo "$HEADER"
    for i in 1 2 3 4 5 6 7 8; do echo "0,pack$i,mobilenet_v2,128,1,10,11.34,1,medium"; done
    echo "60,bigjob,MaskRCNN,8,1,4,32,1,heavy"
} >"$PACK_TRACE"
TASKS=17
"$CARMA" replay "$TRACE" --socket "$SOCK" --time-scale "$TIME_SCALE" --wait >"$WORK/replay.log" 2>&1 &
REPLAY_PID=$!

# ---- kill -9 one agent mid-run, start it again -------------------------------------------------
agent_pid() {  # the agent of node $1 in allocation $JOB
    local p
    for p in $(lab_processes); do
        # The agent itself (carma execs carma-daemon), not the srun that started it.
        [ "$(basename "$(readlink "/proc/$p/exe" 2>/dev/null)")" = carma-daemon ] || continue
        tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q " agent " || continue
        tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURMD_NODENAME=$1" || continue
        echo "$p"
        return
    done
}
running_tasks() {
    "$CARMA" queue --json --socket "$SOCK" 2>/dev/null |
        field 'sum(1 for t in d["tasks"] if t.get("state") == "running")' || echo 0
}
for ((i = 0; i < WAIT_S * 2; i++)); do
    [ "$(running_tasks)" -ge 8 ] 2>/dev/null && break
    sleep 0.5
done
A1=$(agent_pid n1)
if [ -z "$A1" ]; then
    check "found the agent of n1 to kill" false
else
    kill -9 "$A1"
    for ((i = 0; i < 50; i++)); do alive "$A1" || break; sleep 0.1; done
    check "agent of n1 (pid $A1) killed with SIGKILL" bash -c "! [ -e /proc/$A1/status ] || grep -q '^State:.*Z' /proc/$A1/status"
    # The allocation's script starts a node's agent again when it dies.
    for ((i = 0; i < 100; i++)); do
        A1_NEW=$(agent_pid n1)
        [ -n "$A1_NEW" ] && [ "$A1_NEW" != "$A1" ] && break
        sleep 0.1
    done
    check "the allocation started a new agent on n1 (pid ${A1_NEW:-none})" [ -n "$A1_NEW" -a "$A1_NEW" != "$A1" ]
    check "the new agent of n1 reports (both nodes up)" wait_nodes_up 2
fi

# n1's GPUs take tasks again once their monitor windows have refilled.
all_gpus_ok() {
    "$CARMA" gpus --json --socket "$SOCK" 2>/dev/null | python3 -c '
import json, sys
gpus = json.load(sys.stdin)["gpus"]
sys.exit(0 if len(gpus) == 8 and all(g["health"]["state"] == "ok" for g in gpus) else 1)'
}
for ((i = 0; i < WAIT_S * 2; i++)); do all_gpus_ok && break; sleep 0.5; done
check "all eight GPUs take tasks again" all_gpus_ok
"$CARMA" replay "$PACK_TRACE" --socket "$SOCK" --time-scale "$TIME_SCALE" --wait \
    >"$WORK/replay-pack.log" 2>&1 &
PACK_PID=$!

# ---- the outcome -------------------------------------------------------------------------------
for ((i = 0; i < 1800; i++)); do alive "$REPLAY_PID" || alive "$PACK_PID" || break; sleep 0.1; done
if alive "$REPLAY_PID" || alive "$PACK_PID"; then
    kill "$REPLAY_PID" "$PACK_PID" 2>/dev/null
    check "the trace finished within 180 s" false
fi
wait "$REPLAY_PID" 2>/dev/null
replay_rc=$?
wait "$PACK_PID" 2>/dev/null
check "carma replay --wait succeeded (both parts)" [ $replay_rc = 0 -a $? = 0 ]

# Every task with its attempts, as GET /v1/tasks/ID gives them (carma show --json).
DETAILS=$WORK/tasks.json
{
    echo '['
    first=1
    for id in $("$CARMA" queue --all --json --socket "$SOCK" | field '" ".join(str(t["id"]) for t in d["tasks"])'); do
        [ $first = 1 ] || echo ','
        first=0
        "$CARMA" show "$id" --json --socket "$SOCK"
    done
    echo ']'
} >"$DETAILS"

verdict() {  # verdict NAME: one property of the run, from tasks.json; prints why on failure
    python3 - "$DETAILS" "$1" "$TASKS" <<'PY'
import json, sys
tasks = json.load(open(sys.argv[1]))
what, want = sys.argv[2], int(sys.argv[3])
def attempts(t):
    return t.get("attempt_list") or []
def fail(msg):
    print("  " + msg)
    sys.exit(1)
if what == "once":
    if len(tasks) != want:
        fail(f"{len(tasks)} tasks, expected {want}")
    for t in tasks:
        ok = [a for a in attempts(t) if a.get("outcome") == "succeeded"]
        if t.get("state") != "succeeded" or len(ok) != 1:
            fail(f"task {t.get('id')} ({t.get('name')}): state {t.get('state')}, "
                 f"{len(ok)} succeeded attempts of {len(attempts(t))}")
    lost = [a for t in tasks for a in attempts(t) if a.get("outcome") in ("lost", "cancelled", "failed")]
    if lost:
        fail(f"{len(lost)} attempts lost, cancelled or failed")
elif what.startswith("collocated:"):
    node = what.split(":", 1)[1]
    spans = []
    for t in tasks:
        for a in attempts(t):
            if a.get("node") == node and a.get("started_at") is not None:
                spans.append((t.get("id"), set(a.get("gpus") or []), a["started_at"],
                              a.get("ended_at") or float("inf")))
    for i, (t1, g1, s1, e1) in enumerate(spans):
        for (t2, g2, s2, e2) in spans[i + 1:]:
            if t1 != t2 and g1 & g2 and s1 < e2 and s2 < e1:
                print(f"  tasks {t1} and {t2} shared GPU {sorted(g1 & g2)} of {node}")
                sys.exit(0)
    fail(f"no two attempts overlapped on one GPU of {node} ({len(spans)} attempts there)")
elif what == "oom":
    big = [t for t in tasks if t.get("name") == "bigjob"]
    if not big:
        fail("no task bigjob")
    outs = [a.get("outcome") for a in attempts(big[0])]
    if "out-of-memory" not in outs or outs[-1] != "succeeded":
        fail(f"bigjob's attempts: {outs}")
    print(f"  bigjob's attempts: {outs}")
elif what == "tagged":
    for t in tasks:
        for a in attempts(t):
            if a.get("node") not in ("n1", "n2") or not a.get("slurm_job"):
                fail(f"task {t.get('id')} attempt {a.get('number')}: node {a.get('node')}, "
                     f"slurm_job {a.get('slurm_job')}")
PY
}
check "every task succeeded exactly once (nothing lost by the agent's kill -9)" verdict once
check "collocation on n1 (two attempts on one GPU at once)" verdict collocated:n1
check "collocation on n2 (two attempts on one GPU at once)" verdict collocated:n2
check "the out-of-memory crash was relaunched and succeeded" verdict oom
check "every attempt is tagged with its node and Slurm job" verdict tagged

# ---- carma slurm down --------------------------------------------------------------------------
"$CARMA" slurm down --timeout 60s --socket "$SOCK"
check "carma slurm down succeeded" [ $? = 0 ]
check "squeue is empty: allocation $JOB has ended" [ -z "$(squeue -h -o %i 2>/dev/null)" ]

# ---- an allocation that ends under a running task ------------------------------------------------
# A second, one-node allocation; a long task runs on it; `carma slurm down --now` ends the
# allocation at once: the task must be recorded as lost and queued again, never dropped.
out=$("$CARMA" slurm up --nodes 1 --gpus-per-node 4 --gpus emulated:4xA100-40GB --time 10 \
    --munge-socket "$LAB_MUNGE_SOCKET" --output "$WORK/agents-%j.out" --socket "$SOCK" --allow-root-tasks 2>&1)
JOB=$(sed -n 's/^Slurm job \([0-9][0-9]*\):.*/\1/p' <<<"$out")
[ -n "$JOB" ] || fatal "the second carma slurm up printed no job id: $out"
wait_nodes_up 1 || fatal "the agent of the second allocation did not come up"
LONG=$("$CARMA" submit --socket "$SOCK" --name survivor --workdir "$WORK" -- \
    "$(dirname "$CARMA")/carma-fakejob" --profile survivor --duration-s 36000 --memory 2GiB 2>&1 |
    sed -n 's/.*task \([0-9][0-9]*\).*/\1/p' | head -1)
task_field() {  # task_field ID EXPR: a Python expression over the task t (GET /v1/tasks/ID)
    "$CARMA" show "$1" --json --socket "$SOCK" 2>/dev/null |
        python3 -c 'import json,sys; t=json.load(sys.stdin); print(eval(sys.argv[1]))' "$2" 2>/dev/null
}
for ((i = 0; i < WAIT_S * 2; i++)); do
    [ "$(task_field "$LONG" 't["state"]')" = running ] && break
    sleep 0.5
done
check "task $LONG runs on the second allocation" [ "$(task_field "$LONG" 't["state"]')" = running ]
"$CARMA" slurm down --now --socket "$SOCK"
for ((i = 0; i < WAIT_S * 2; i++)); do
    [ "$(task_field "$LONG" 't["attempt_list"][0]["outcome"]')" = lost ] && break
    sleep 0.5
done
check "its attempt was recorded as lost when the allocation ended" \
    [ "$(task_field "$LONG" 't["attempt_list"][0]["outcome"]')" = lost ]
check "and the task is queued again (state $(task_field "$LONG" 't["state"]'))" \
    [ "$(task_field "$LONG" 't["state"]')" = queued ]
check "squeue is empty: allocation $JOB has ended" [ -z "$(squeue -h -o %i 2>/dev/null)" ]
"$CARMA" cancel "$LONG" --socket "$SOCK" >/dev/null 2>&1
[ -n "$RESTARTED_PID" ] && for ((i = 0; i < 100; i++)); do alive "$RESTARTED_PID" || break; sleep 0.1; done
