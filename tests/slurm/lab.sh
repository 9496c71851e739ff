#!/usr/bin/env bash
# A private two-node Slurm cluster on this host, for tests: `lab.sh up DIR` / `lab.sh down DIR`.
#
# Two slurmd (-N n1, -N n2; Debian's Slurm is built with MULTIPLE_SLURMD), one slurmctld and a
# munged with its own key and socket. Each node has 4 fake GPUs: symlinks to /dev/null, since
# gres.conf rejects regular files and symlinks need no write access to /dev. Everything (config,
# key, spool, logs, PID files) lives under DIR, and the ports are picked free, so the lab never
# touches /etc/slurm, /etc/munge or another lab running at the same time.
#
# Needs root (slurmd runs jobs as their users) and no systemd: each daemon daemonizes itself and
# writes a PID file, and `down` stops them by those PID files only.
#
# After `up`, source DIR/env.sh (it sets SLURM_CONF) before calling sbatch/squeue/srun/scancel.
# Knobs (environment): LAB_GPUS_PER_NODE (4), LAB_CPUS_PER_NODE (8), LAB_PORT_BASE (free ports
# from a random base in 20000..31990, below the ephemeral range), LAB_WAIT_S (bound of every wait, 30).
set -euo pipefail

usage() {
    echo "usage: $0 up DIR | down DIR" >&2
    exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
DIR=$2
GPUS=${LAB_GPUS_PER_NODE:-4}
CPUS=${LAB_CPUS_PER_NODE:-8}
WAIT_S=${LAB_WAIT_S:-30}
NODES=(n1 n2)

log_files() {
    ls "$DIR"/log/*.log "$DIR"/munge/munged.log 2>/dev/null || true
}

dump_logs() {
    local f
    for f in $(log_files); do
        echo "---- tail of $f" >&2
        tail -n 20 "$f" >&2 || true
    done
}

die() {
    echo "lab.sh: $*" >&2
    dump_logs
    exit 1
}

# Alive and not a zombie (PID 1 here may not reap, so exited daemons linger as <defunct>).
alive() {
    [ -n "${1:-}" ] && [ -e "/proc/$1/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

pid_in() {
    [ -s "$1" ] && tr -dc '0-9' <"$1" || true
}

# wait_for WHAT COMMAND...: polls every 0.1 s for at most WAIT_S seconds.
wait_for() {
    local what=$1
    shift
    local i
    for ((i = 0; i < WAIT_S * 10; i++)); do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    die "timed out after ${WAIT_S}s waiting for $what"
}

port_in_use() {
    # /proc/net/tcp{,6} list local ports in hex. Any state counts: a port held by a connection
    # (or one in TIME_WAIT) cannot be bound by slurmctld either.
    local hex
    hex=$(printf '%04X' "$1")
    grep -qE "^ *[0-9]+: [0-9A-F]+:$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

pick_ports() {
    local base tries p ok
    for ((tries = 0; tries < 50; tries++)); do
        # Below the kernel's ephemeral range (32768 and up by default), where outgoing
        # connections take their ports: a port picked there can be taken before slurmctld binds.
        base=${LAB_PORT_BASE:-$((20000 + (RANDOM % 1200) * 10))}
        ok=1
        for p in $base $((base + 1)) $((base + 2)); do
            if port_in_use "$p"; then ok=0; fi
        done
        if [ $ok = 1 ]; then
            PORT_BASE=$base
            return 0
        fi
        [ -z "${LAB_PORT_BASE:-}" ] || die "ports $base..$((base + 2)) (LAB_PORT_BASE) are in use"
    done
    die "found no three free TCP ports"
}

write_config() {
    local n i files
    cat >"$DIR/slurm.conf" <<CONF
# Written by tests/slurm/lab.sh: a private two-node lab cluster.
ClusterName=carmalab
SlurmctldHost=localhost
SlurmctldPort=$PORT_BASE
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/run/munge.socket,cred_expire=5
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=2
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT_BASE + 1)) CPUs=$CPUS RealMemory=4000 Gres=gpu:$GPUS State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((PORT_BASE + 2)) CPUs=$CPUS RealMemory=4000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=lab Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP
CONF
    {
        echo "AutoDetect=off"
        for n in "${NODES[@]}"; do
            echo "NodeName=$n Name=gpu File=$DIR/dev/${n}gpu[0-$((GPUS - 1))]"
        done
    } >"$DIR/gres.conf"
    for n in "${NODES[@]}"; do
        for ((i = 0; i < GPUS; i++)); do
            ln -sfn /dev/null "$DIR/dev/${n}gpu$i"
        done
    done
    cat >"$DIR/env.sh" <<ENV
# Source this to talk to the lab cluster in $DIR.
export SLURM_CONF=$DIR/slurm.conf
export LAB_MUNGE_SOCKET=$DIR/run/munge.socket
ENV
}

munge_ok() {
    munge -S "$DIR/run/munge.socket" -n </dev/null | unmunge -S "$DIR/run/munge.socket"
}

ctld_ok() {
    scontrol ping | grep -q 'is UP'
}

nodes_idle() {
    local states
    states=$(sinfo -h -N -o '%N %t' | sort | tr '\n' ' ')
    [ "$states" = "n1 idle n2 idle " ]
}

up() {
    [ "$(id -u)" = 0 ] || die "must run as root (slurmd runs jobs as their users)"
    local bin
    for bin in munged mungekey slurmctld slurmd scontrol sinfo; do
        command -v "$bin" >/dev/null || [ -x "/usr/sbin/$bin" ] ||
            die "$bin not found: install Slurm and munge (scripts/setup)"
    done
    export PATH=$PATH:/usr/sbin
    if [ -s "$DIR/run/slurmctld.pid" ] && alive "$(pid_in "$DIR/run/slurmctld.pid")"; then
        echo "lab.sh: a lab is already running in $DIR; run '$0 down $DIR' first" >&2
        exit 1
    fi
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd)
    rm -rf "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/munge" "$DIR/dev"
    mkdir -p "$DIR/spool/ctld" "$DIR/log" "$DIR/run" "$DIR/munge" "$DIR/dev"
    local n
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/$n"; done
    # munged insists that everyone may traverse to its socket and that only its user owns the key.
    chmod 755 "$DIR" "$DIR/run"
    chmod 700 "$DIR/munge"
    mungekey --create --keyfile="$DIR/munge/munge.key" >/dev/null 2>&1 ||
        die "mungekey could not create $DIR/munge/munge.key"
    chmod 600 "$DIR/munge/munge.key"
    pick_ports
    write_config
    export SLURM_CONF=$DIR/slurm.conf

    # Its credentials say they were made on the lab's nodes' NodeAddr, as a real node's munged
    # does on its own address: CARMA's server takes a node's reports only from that address.
    munged --socket="$DIR/run/munge.socket" --key-file="$DIR/munge/munge.key" \
        --log-file="$DIR/munge/munged.log" --pid-file="$DIR/run/munged.pid" \
        --seed-file="$DIR/munge/munged.seed" --origin=127.0.0.1 >>"$DIR/log/start.log" 2>&1 ||
        die "munged did not start"
    wait_for "munged to answer on $DIR/run/munge.socket" munge_ok
    slurmctld -f "$SLURM_CONF" >>"$DIR/log/start.log" 2>&1 || die "slurmctld did not start"
    wait_for "slurmctld to answer 'scontrol ping' on port $PORT_BASE" ctld_ok
    for n in "${NODES[@]}"; do
        slurmd -f "$SLURM_CONF" -N "$n" >>"$DIR/log/start.log" 2>&1 || die "slurmd -N $n did not start"
    done
    wait_for "nodes n1 and n2 to be idle" nodes_idle
    echo "lab.sh: two-node Slurm up in $DIR (slurmctld port $PORT_BASE, nodes n1 n2, $GPUS GPUs each)"
    echo "export SLURM_CONF=$DIR/slurm.conf"
}

# stop_pid FILE: SIGTERM the daemon named by FILE, wait, then SIGKILL if it ignored it.
stop_pid() {
    local f=$1 p i
    p=$(pid_in "$f")
    alive "$p" || return 0
    kill "$p" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        alive "$p" || return 0
        sleep 0.1
    done
    echo "lab.sh: $f ($p) ignored SIGTERM for 10s, sending SIGKILL" >&2
    kill -9 "$p" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        alive "$p" || return 0
        sleep 0.1
    done
    echo "lab.sh: $f ($p) still alive after SIGKILL" >&2
    return 1
}

# The job steps of this lab: slurmstepd processes inherit slurmd's SLURM_CONF.
lab_stepds() {
    local p
    for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
        if alive "$p" && tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "SLURM_CONF=$DIR/slurm.conf"; then
            echo "$p"
        fi
    done
}

down() {
    [ -d "$DIR" ] || { echo "lab.sh: no lab in $DIR"; return 0; }
    DIR=$(cd "$DIR" && pwd)
    export SLURM_CONF=$DIR/slurm.conf PATH=$PATH:/usr/sbin
    local rc=0 n i ids p
    # Jobs first: stopping slurmd under a finishing step leaves a slurmstepd retrying for ever.
    if [ -f "$SLURM_CONF" ] && alive "$(pid_in "$DIR/run/slurmctld.pid")" && timeout 5 scontrol ping >/dev/null 2>&1; then
        ids=$(timeout 5 squeue -h -o %i 2>/dev/null || true)
        if [ -n "$ids" ]; then
            # shellcheck disable=SC2086
            timeout 5 scancel --full $ids 2>/dev/null || true
            for ((i = 0; i < 150; i++)); do
                [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
                sleep 0.1
            done
        fi
    fi
    for n in "${NODES[@]}"; do stop_pid "$DIR/run/slurmd-$n.pid" || rc=1; done
    for p in $(lab_stepds); do
        echo "lab.sh: slurmstepd $p outlived its slurmd, killing it" >&2
        kill -9 "$p" 2>/dev/null || true
    done
    stop_pid "$DIR/run/slurmctld.pid" || rc=1
    stop_pid "$DIR/run/munged.pid" || rc=1
    for f in "$DIR"/run/*.pid; do
        [ -e "$f" ] || continue
        if alive "$(pid_in "$f")"; then
            echo "lab.sh: $(basename "$f" .pid) (pid $(pid_in "$f")) is still running" >&2
            rc=1
        fi
    done
    [ $rc = 0 ] && echo "lab.sh: lab in $DIR is down"
    return $rc
}

case $cmd in
    up) up ;;
    down) down ;;
    *) usage ;;
esac
