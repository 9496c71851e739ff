# Sourced by the daemon benchmarks. The per-user limits (docs/admin-guide.md, "Per-user limits")
# would refuse the benchmarks' floods of submissions from one user, which is their point but not
# what these benchmarks measure: no_limits_args CARMA DIR prints the `--config FILE` that turns them
# off for a daemon that has them (nothing for an older one, which has none), writing FILE into DIR.
no_limits_args() {
  local carma=$1 dir=$2
  if "$carma" serve --help 2>/dev/null | grep -q -- --allowed-hosts; then
    mkdir -p "$dir"
    printf 'limits:\n  max_waiting_per_user: 0\n  max_array_size: 0\n  max_submit_bytes_per_task: 0\n  max_submit_bytes_per_request: 0\n  submit_rate_per_user: 0\n' \
      >"$dir/no-limits.yaml"
    echo "--config $dir/no-limits.yaml"
  fi
}
