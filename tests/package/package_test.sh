#!/usr/bin/env bash
# The Debian package (issue 24, item 1), from this build directory's programs: cpack builds it,
# lintian finds no error in it, and installed into a throwaway root (dpkg --root) it has every file
# where docs/admin-guide.md says, with its modes, the unit enabled and not started, and from that
# root `carma --version`, `carma-daemon serve --help`, the man pages, the conffile and the bash
# completion work; its postinst restarts a running daemon on an upgrade. A missing tool FAILS the test, naming it and the package that has it.
#
# Usage: package_test.sh BUILD_DIR
set -euo pipefail
build=$1

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

for need in cpack:cmake dpkg-deb:dpkg dpkg-shlibdeps:dpkg-dev file:file python3:python3 \
  lintian:lintian bash:bash gzip:gzip; do
  tool=${need%%:*}
  command -v "$tool" >/dev/null ||
    fail "$tool is missing (Debian package ${need#*:}; scripts/setup installs it)"
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "cpack"
if ! cpack --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1; then
  cat "$work/cpack.log" >&2
  fail "cpack could not build the package (its output is above)"
fi
deb=$(ls "$work"/out/carma_*.deb)
dpkg-deb --info "$deb"
version=$(dpkg-deb --field "$deb" Version)
depends=$(dpkg-deb --field "$deb" Depends)
[[ $depends == *libc6* ]] || fail "Depends is '$depends': dpkg-shlibdeps found no libraries"
[[ $depends == *libsqlite3* && $depends == *libssl3* ]] ||
  fail "Depends is '$depends': the daemon's SQLite and OpenSSL are missing from it"
[[ $(dpkg-deb --field "$deb" Recommends) == *bash-completion* ]] ||
  fail "Recommends does not name bash-completion, which loads the completion"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -qx /etc/carma/carma.yaml ||
  fail "/etc/carma/carma.yaml is not a conffile"

step "lintian"
# --fail-on error: warnings (binary-without-manpage for carma-shim and carma-fakejob, ...) are
# shown, errors fail.
if ! lintian --fail-on error --display-info "$deb" 2>&1 | tee "$work/lintian.txt"; then
  fail "lintian reports errors (above)"
fi
echo "lintian: $(grep -c '^E:' "$work/lintian.txt" || true) errors," \
  "$(grep -c '^W:' "$work/lintian.txt" || true) warnings," \
  "$(grep -c '^I:' "$work/lintian.txt" || true) infos"

step "dpkg --root (a throwaway root)"
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
# The root's dependencies are this system's packages: the programs run on its libraries. The
# maintainer scripts run outside the root with DPKG_ROOT set (--force-script-chrootless: the
# root has no shell); they act on the root only, never on this system's systemd.
cp /var/lib/dpkg/status "$root/var/lib/dpkg/status"
touch "$root/var/lib/dpkg/available"
dpkg_root=(dpkg --root="$root" --force-script-chrootless --log=/dev/null)
if [ "$(id -u)" -ne 0 ]; then
  dpkg_root+=(--force-not-root)
fi
# dpkg warns that the root has no file lists of this system's packages: true, and beside the point.
quiet_dpkg() {
  local rc=0
  "${dpkg_root[@]}" "$@" 2>"$work/dpkg.err" || rc=$?
  grep -v "files list file for package" "$work/dpkg.err" >&2 || true
  return $rc
}
quiet_dpkg --install "$deb" || fail "dpkg could not install the package into $root"

mode() { stat -c '%A %U' "$root$1" 2>/dev/null || echo "missing"; }
expect_mode() {
  local got
  got=$(mode "$1")
  [ "$got" = "$2" ] || fail "$1: '$got', expected '$2'"
  echo "$1: $got"
}
for p in carma carma-daemon carma-shim carma-fakejob; do
  expect_mode /usr/bin/$p "-rwxr-xr-x root"
done
expect_mode /lib/systemd/system/carma.service "-rw-r--r-- root"
expect_mode /etc/carma/carma.yaml "-rw-r--r-- root"
expect_mode /var/lib/carma "drwx--x--x root"
for page in man1/carma.1.gz man8/carma-daemon.8.gz man5/carma.yaml.5.gz; do
  expect_mode /usr/share/man/$page "-rw-r--r-- root"
done
expect_mode /usr/share/bash-completion/completions/carma "-rw-r--r-- root"
grep -qx 'ExecStart=/usr/bin/carma serve --config /etc/carma/carma.yaml' \
  "$root/lib/systemd/system/carma.service" || fail "the unit does not start /usr/bin/carma serve"
# The daemon owns its tasks' cgroups (fences), and the kernel never picks it in an OOM.
grep -qx 'Delegate=yes' "$root/lib/systemd/system/carma.service" ||
  fail "the unit does not delegate its cgroup subtree (Delegate=yes)"
grep -qx 'OOMScoreAdjust=-900' "$root/lib/systemd/system/carma.service" ||
  fail "the unit does not keep the daemon from the OOM killer (OOMScoreAdjust=-900)"
# `systemctl reload carma` re-reads the config (SIGHUP).
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$root/lib/systemd/system/carma.service" ||
  fail "the unit cannot reload the daemon (ExecReload=/bin/kill -HUP \$MAINPID)"

# Enabled (postinst) and not started: the root's state directory is as the package left it.
wants=$root/etc/systemd/system/multi-user.target.wants/carma.service
[ -L "$wants" ] || fail "carma.service is not enabled: no $wants"
echo "enabled: $(readlink "$wants")"
[ -z "$(ls -A "$root/var/lib/carma")" ] || fail "something ran in /var/lib/carma: $(ls -A "$root/var/lib/carma")"

step "carma --version"
got=$("$root/usr/bin/carma" --version)
echo "$got"
[ "$got" = "carma $version" ] || fail "carma --version says '$got'; the package is $version"

step "carma-daemon serve --help, and carma serve --help (carma becomes carma-daemon)"
"$root/usr/bin/carma-daemon" serve --help >"$work/serve-help.txt" ||
  fail "carma-daemon serve --help failed"
head -5 "$work/serve-help.txt"
grep -q -- '--print-config' "$work/serve-help.txt" || fail "serve --help lists no --print-config"
"$root/usr/bin/carma" serve --help | cmp -s - "$work/serve-help.txt" ||
  fail "carma serve --help differs from carma-daemon serve --help"

step "/etc/carma/carma.yaml: every key commented out at the daemon's default"
defaults=$("$root/usr/bin/carma" serve --print-config | tail -n +3)
"$root/usr/bin/carma" serve --config "$root/etc/carma/carma.yaml" --print-config >/dev/null ||
  fail "the daemon does not read the packaged carma.yaml"
sed -E 's/^#([a-z]|  [a-z])/\1/' "$root/etc/carma/carma.yaml" >"$work/uncommented.yaml"
uncommented=$("$root/usr/bin/carma" serve --config "$work/uncommented.yaml" --print-config) ||
  fail "carma.yaml with every key uncommented does not read"
[ "$(tail -n +3 <<<"$uncommented")" = "$defaults" ] ||
  fail "carma.yaml uncommented is not the daemon's defaults: $(diff <(echo "$defaults") <(tail -n +3 <<<"$uncommented"))"
keys=$(grep -cE '^(#[a-z_]+|#  [a-z_]+):' "$root/etc/carma/carma.yaml")
echo "$keys keys, each at its default"

step "man pages"
for cmd in submit queue top acct cancel; do
  zcat "$root/usr/share/man/man1/carma.1.gz" | grep -q "^\.SS \"carma $cmd" ||
    fail "carma(1) has no section for carma $cmd"
done
zcat "$root/usr/share/man/man8/carma-daemon.8.gz" | grep -q '^\.SS "carma serve' ||
  fail "carma-daemon(8) has no section for carma serve"
for key in policy gpus state_dir limits.max_array_size risk.smact; do
  zcat "$root/usr/share/man/man5/carma.yaml.5.gz" | grep -qF "\\fB${key//_/_}\\fR" ||
    fail "carma.yaml(5) has no key $key"
done
echo "carma(1), carma-daemon(8) and carma.yaml(5) have their sections"

step "bash completion"
complete_words() {
  # The words `carma ARGS... <TAB>` offers; the last argument is the word being completed.
  bash -c 'source "$1"; shift; COMP_WORDS=(carma "$@"); COMP_CWORD=$#; _carma
           printf "%s\n" "${COMPREPLY[@]}"' _ "$root/usr/share/bash-completion/completions/carma" "$@"
}
check_completion() {
  local want=$1
  shift
  local got
  got=$(complete_words "$@" | tr '\n' ' ')
  echo "carma $* <TAB>: $got"
  [[ " $got " == *" $want "* ]] || fail "carma $* <TAB> offers '$got', not $want"
}
check_completion submit su
check_completion --gpus submit --gp
check_completion --print-config serve --pri
check_completion backup admin ""
check_completion --state-dir admin backup --st
check_completion up slurm ""
[ -z "$(complete_words submit -- ec)" ] || fail "completion after -- offers carma's words"
check_completion PD queue -t ""
check_completion running cancel --state r
check_completion COMPLETED queue --state COMP

step "postinst on an upgrade: restarts a running daemon (deb-systemd-invoke), as debhelper does"
# The package's postinst runs with stand-ins for systemctl and the deb-systemd tools that log
# their arguments, on a system that looks booted with systemd: /run/systemd/system exists (in a
# mount namespace of its own when this one has none). Whether the daemon is active is the
# stand-in's CARMA_TEST_ACTIVE.
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst >"$work/postinst"
mkdir -p "$work/stubs"
for tool in systemctl deb-systemd-invoke deb-systemd-helper; do
  cat >"$work/stubs/$tool" <<STUB
#!/bin/sh
echo "$tool \$*" >>"\$CARMA_TEST_LOG"
case "$tool \$*" in
  *" is-active "*) [ "\$CARMA_TEST_ACTIVE" = yes ] ;;
esac
STUB
  chmod +x "$work/stubs/$tool"
done
run_postinst() { # ACTIVE ARGS...: prints the calls the postinst made, one a line
  local active=$1
  shift
  : >"$work/calls.log"
  local env=(env -u DPKG_ROOT PATH="$work/stubs:$PATH" CARMA_TEST_LOG="$work/calls.log"
    CARMA_TEST_ACTIVE="$active")
  if [ -d /run/systemd/system ]; then
    "${env[@]}" sh "$work/postinst" "$@" || fail "postinst $* failed"
  else
    local ns=(unshare -m)
    [ "$(id -u)" -eq 0 ] || ns=(unshare -rm)
    "${ns[@]}" sh -c 'mount -t tmpfs carma-test /run && mkdir -p /run/systemd/system &&
                      exec "$@"' _ "${env[@]}" sh "$work/postinst" "$@" ||
      fail "postinst $* failed, or ${ns[*]} (util-linux) could not give it a /run/systemd/system"
  fi
  cat "$work/calls.log"
}
calls=$(run_postinst yes configure 0.0.1)
echo "upgrade, daemon running: $(tr '\n' ';' <<<"$calls")"
grep -qx "deb-systemd-invoke restart carma.service" <<<"$calls" ||
  fail "an upgrade does not restart the running daemon (deb-systemd-invoke restart carma.service): $calls"
calls=$(run_postinst no configure 0.0.1)
if grep -q "deb-systemd-invoke" <<<"$calls"; then
  fail "an upgrade starts a daemon the admin had stopped: $calls"
fi
calls=$(run_postinst no configure)
if grep -qE "deb-systemd-invoke|systemctl.* (start|restart)" <<<"$calls"; then
  fail "a first installation starts the daemon before the admin reviewed carma.yaml: $calls"
fi
echo "a first installation enables and does not start; an upgrade restarts only a running daemon"

step "dpkg --purge"
quiet_dpkg --purge carma || fail "dpkg could not purge the package from $root"
[ ! -e "$wants" ] || fail "carma.service is still enabled after the purge"
[ ! -e "$root/usr/bin/carma" ] || fail "/usr/bin/carma is still there after the purge"
echo "PASS: the package builds, lintian finds no error, and it installs, runs and purges"
