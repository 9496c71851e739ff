# Sourced by scripts/gpu-check (and copied into its bundle): the fence steps (issue 41), run on
# the GPU machine against its real kernel, cgroup hierarchy and NVIDIA device files.
#   fence_devices: a CPU-only task (-g 0) is fenced off every GPU's /dev/nvidiaN, so opening
#                  /dev/nvidia0 fails with EPERM there, while a task given GPU 0 opens it;
#   fence_memory:  a task over its host memory (--mem 128M, touching 600 MiB) is stopped alone,
#                  ends out-of-host-memory and is not relaunched;
#   fence_daemon:  the daemon still answers, and what the fences counted reaches accounting.
# Each prints what it saw; each returns non-zero when what it saw is not what it should be.

# The Python that opens a device file and says how it went: "ok", or the errno's name.
FENCE_OPEN_PY='import errno, os, sys
try:
    os.close(os.open(sys.argv[1], os.O_RDWR))
    print("open", sys.argv[1], "ok")
except OSError as e:
    print("open", sys.argv[1], errno.errorcode.get(e.errno, e.errno))'

fence_devices() {
    local dev=/dev/nvidia0 py ok=0 gpu_id cpu_id
    if (( EMULATED )); then
        say "emulated GPUs have no device files: nothing to fence off"
        return "$SKIP"
    fi
    [[ -c $dev ]] || { say "$dev is not a character device here (no NVIDIA driver)"; return "$SKIP"; }
    py=$(command -v python3) || { say "python3 is not on PATH"; return 1; }
    carma gpus | grep '^fences:' | sed 's/^/  gpus| /'
    cpu_id=$(submit fence-cpu -g 0 --max-attempts 1 -- "$py" -c "$FENCE_OPEN_PY" "$dev") || return 1
    gpu_id=$(submit fence-gpu -g 1 --max-attempts 1 -- "$py" -c "$FENCE_OPEN_PY" "$dev") || return 1
    watch_tasks 120 "$cpu_id" "$gpu_id" || ok=1
    local cpu_out gpu_out
    cpu_out=$(carma logs "$cpu_id")
    gpu_out=$(carma logs "$gpu_id")
    say "CPU-only task: $cpu_out"
    say "task on GPU 0: $gpu_out"
    [[ $cpu_out == "open $dev EPERM" ]] || { say "the CPU-only task was not refused $dev"; ok=1; }
    [[ $gpu_out == "open $dev ok" ]] || { say "the task on GPU 0 could not open $dev"; ok=1; }
    return $ok
}

fence_memory() {
    local py id ok=0 shown
    py=$(command -v python3) || { say "python3 is not on PATH"; return 1; }
    id=$(submit fence-leak -g 0 --mem 128M --max-attempts 3 -- \
        "$py" -c "b = bytearray(600 << 20); print('survived')") || return 1
    watch_tasks 120 "$id" || ok=1
    shown=$(carma show "$id")
    sed 's/^/  show| /' <<<"$shown"
    grep -q 'out-of-host-memory after 1 attempt' <<<"$shown" ||
        { say "the leak did not end out-of-host-memory after 1 attempt"; ok=1; }
    grep -q 'host-memory limit of 128 MiB' <<<"$shown" || { say "the limit is not named"; ok=1; }
    return $ok
}

fence_daemon() {
    kill -0 "$DAEMON_PID" 2>/dev/null || { say "the daemon is gone"; return 1; }
    carma gpus >/dev/null || { say "the daemon does not answer"; return 1; }
    carma acct --format id,name,state,outcomes,total_cpu,max_rss | sed 's/^/  acct| /'
    carma acct --json | grep -q '"max_rss_mib": *[0-9]' ||
        { say "accounting has no max_rss_mib from a fence"; return 1; }
}
