#!/bin/bash
# A user's commands find the packaged daemon without CARMA_SOCKET (issue 45, item 1): the system
# daemon runs as root on the default socket of a packaged installation, /var/lib/carma/carma.sock
# (a tmpfs over /var/lib in a mount namespace of this test's own, so no real installation is
# touched), and a user who set nothing reaches it; their own daemon, while it runs, wins; a stale
# socket of theirs does not hide the system daemon; CARMA_SOCKET and --socket still win. The two
# daemons tell themselves apart by their number of GPUs (system 2, the user's own 1).
# Needs root (a user of its own, a mount namespace).
# Usage: system_socket_test.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
if [ -z "${CARMA_IN_NAMESPACE:-}" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (a test user, a mount namespace)"; exit 1; }
    id carma-sock-u >/dev/null 2>&1 || useradd --no-create-home --shell /bin/sh carma-sock-u ||
        { echo "FAIL: useradd could not create carma-sock-u"; exit 1; }
    CARMA_IN_NAMESPACE=1 exec unshare -m --propagation private "$0" "$@"
    echo "FAIL: unshare -m (util-linux) could not make a mount namespace"
    exit 1
fi
source "$(dirname "$0")/../lib.sh" system-socket
logs=("$T/system.log" "$T/own.log" "$T/out.txt")
mount -t tmpfs carma-test-var-lib /var/lib || fail "cannot mount a tmpfs over /var/lib"
mkdir -m 0711 /var/lib/carma

# The programs where the user can run them, and the user's home.
chmod 0755 "$T"
mkdir -p "$T/bin" "$T/home"
cp "$B/carma" "$B/carma-daemon" "$B/carma-shim" "$T/bin/"
chmod 0755 "$T/bin" "$T/bin"/*
chown carma-sock-u: "$T/home"
own_socket=$T/home/.local/state/carma/carma.sock

"$T/bin/carma" serve --gpus emulated:2xA100-40GB --state-dir /var/lib/carma >"$T/system.log" 2>&1 &
pids+=($!)
wait_for '[ -S /var/lib/carma/carma.sock ]' 150 || fail "the system daemon did not listen"

# as_user COMMAND...: as the user (setpriv execs, so $! is the command's own pid), with a
# login's environment and nothing of CARMA's set.
user_env=(setpriv --reuid=carma-sock-u --regid="$(id -g carma-sock-u)" --init-groups
    env -i HOME="$T/home" PATH=/usr/bin:/bin)
as_user() {
    "${user_env[@]}" "$@" >"$T/out.txt" 2>&1
}
gpus_seen() {  # the number of GPUs of the daemon `carma gpus` reached, as the user
    as_user "$T/bin/carma" gpus --json "$@" && field 'len(d["gpus"])' <"$T/out.txt"
}

got=$(gpus_seen)
[ "$got" = 2 ] || fail "a user with nothing set does not reach the system daemon (saw '$got')"
echo "PASS a user reaches the system daemon at /var/lib/carma/carma.sock"

"${user_env[@]}" "$T/bin/carma" serve --gpus emulated:1xA100-40GB --fences off >"$T/own.log" 2>&1 &
own=$!
pids+=($own)
wait_for "[ -S '$own_socket' ]" 150 || fail "the user's own daemon did not listen at $own_socket"
got=$(gpus_seen)
[ "$got" = 1 ] || fail "the user's own daemon does not win while it runs (saw '$got' GPUs)"
echo "PASS the user's own daemon wins while it runs"

got=$(gpus_seen --socket /var/lib/carma/carma.sock)
[ "$got" = 2 ] || fail "--socket does not win over the user's own daemon (saw '$got')"
echo "PASS --socket wins"

kill -9 "$own"
wait "$own" 2>/dev/null
[ -S "$own_socket" ] || fail "a killed daemon left no socket; the stale-socket case is untested"
got=$(gpus_seen)
[ "$got" = 2 ] || fail "a stale socket of the user's hides the system daemon (saw '$got')"
echo "PASS a stale socket of the user's own does not hide the system daemon"

as_user env CARMA_SOCKET="$T/nowhere.sock" "$T/bin/carma" gpus &&
    fail "CARMA_SOCKET naming no daemon was not used"
grep -q "$T/nowhere.sock" "$T/out.txt" || fail "the error does not name CARMA_SOCKET's socket"
echo "PASS CARMA_SOCKET wins"
echo "PASS"
