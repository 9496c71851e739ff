#!/usr/bin/env bash
# The GpuCheck tests of scripts/gpu-check, against binaries already built in BUILD_DIR:
#   gpu_check_test.sh bundle BUILD_DIR     the bundle holds what a GPU machine needs, runs, fits
#   gpu_check_test.sh emulated BUILD_DIR   the bundle's own gpu-check, rehearsed on emulated GPUs
#   gpu_check_test.sh fake-driver BUILD_DIR FAKE_CUDA FAKE_CUDA_NVML
#       the GPU machine's run itself (carma-fakejob --cuda, NVML, nvidia-smi, MPS) against fakes of
#       the driver's libraries and programs, 10x faster
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:?mode: bundle or emulated}
build=${2:?the build directory}
source "$root/tests/lib.sh" gpu-check-test
tmp=$T
dir=$tmp/bundle

make_bundle() {
    if ! "$root/scripts/gpu-check" --bundle "$dir" --build-dir "$build" >"$tmp/bundle.out" 2>&1; then
        cat "$tmp/bundle.out"
        fail "scripts/gpu-check --bundle failed"
    fi
}

case $mode in
    bundle)
        make_bundle
        cat "$tmp/bundle.out"
        for f in bin/carma bin/carma-daemon bin/carma-shim bin/carma-fakejob gpu-check gpu-check-train.py; do
            [[ -x $dir/$f ]] || fail "the bundle lacks $f (or it is not executable)"
        done
        [[ -s $dir/MANIFEST ]] || fail "the bundle lacks MANIFEST"
        ls "$dir"/lib/fallback/libstdc++.so* >/dev/null 2>&1 || fail "no libstdc++ in lib/fallback"
        ls "$dir"/lib/libfmt.so* >/dev/null 2>&1 || fail "no libfmt in lib"
        ls "$dir"/lib/libc.so* "$dir"/lib/ld-linux* >/dev/null 2>&1 && fail "glibc was bundled"
        LD_LIBRARY_PATH=$dir/lib:$dir/lib/fallback "$dir/bin/carma" --help >"$tmp/help" 2>&1 ||
            { cat "$tmp/help"; fail "bin/carma --help fails with the bundled libraries"; }
        grep -q serve "$tmp/help" || fail "bin/carma --help does not list serve"
        bytes=$(du -sb "$dir" | cut -f1)
        max_mib=${GPU_CHECK_MAX_BUNDLE_MIB:-60}
        (( bytes < max_mib * 1048576 )) || fail "the bundle is $bytes bytes, over $max_mib MiB"
        grep -q "bundle: .* MiB" "$tmp/bundle.out" || fail "--bundle did not print the size"
        "$dir/gpu-check" --help 2>&1 | grep -q -- '--emulated' || fail "DIR/gpu-check --help"
        "$dir/gpu-check" --no-such-flag >/dev/null 2>&1
        (( $? == 2 )) || fail "an unknown flag must exit 2"
        echo "GpuCheck.Bundle: $bytes bytes"
        ;;
    emulated)
        make_bundle
        timeout 290 "$dir/gpu-check" --emulated >"$tmp/run.out" 2>&1
        rc=$?
        cat "$tmp/run.out"
        (( rc == 0 )) || fail "DIR/gpu-check --emulated exited $rc"
        for want in "--- ok: default: start the daemon" \
            "--- ok: default: a pair that shares the GPU" \
            "--- ok: default: a pair that runs out of memory" \
            "--- ok: default: stop the daemon" \
            "--- ok: default: a foreign process is shown and respected" \
            "--- ok: default: a task in another PID namespace teaches no 0 MiB" \
            "--- skipped: default: a CPU-only task is refused the GPU's device file" \
            "--- ok: default: a task over its host memory is stopped alone" \
            "--- ok: default: the daemon survives and accounts what the fences counted" \
            "--- ok: mps: a pair that runs out of memory" \
            "--- ok: mps: two users do not wait behind each other's MPS server" \
            "--- ok: mps: the memory limit by device ordinal stops an allocation beyond it" \
            "owner foreign user" \
            "recorded unobserved" \
            "torch.OutOfMemoryError: CUDA out of memory" \
            " 0 failed,"; do
            grep -q -F -- "$want" "$tmp/run.out" || fail "the run's output lacks '$want'"
        done
        ;;
    fake-driver)
        make_bundle
        fake=$tmp/fake-driver
        mkdir -p "$fake"
        # The second user of the MPS check loads the fake driver and shares its GPU memory file.
        chmod 755 "$tmp" "$fake"
        : >"$tmp/gpu-memory" && chmod 666 "$tmp/gpu-memory"
        cp "${3:?the fake libcuda}" "$fake/libcuda.so.1"
        cp "${4:?the fake libnvidia-ml (fake_cuda_nvml.c)}" "$fake/libnvidia-ml.so.1"
        # Also read by the tasks the daemon launches, whose environment the test does not set.
        printf 'FAKE_CUDA_DEVICES=2\nFAKE_CUDA_MEMORY_MIB=40960\nFAKE_CUDA_SHARED_FILE=%s\n' \
            "$tmp/gpu-memory" >"$fake/fake_cuda.env"
        cat >"$fake/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
    -L) echo "GPU 0: Fake GPU 0 (UUID: GPU-fcda0000-0000-4000-8000-000000000000)"
        echo "GPU 1: Fake GPU 1 (UUID: GPU-fcda0000-0000-4000-8000-000000000001)" ;;
    *query-compute-apps*) ;;
    *query-gpu=index,utilization*) echo "0, 90 %, 10240 MiB" ;;
    *query-gpu*) echo "index, name, memory.total [MiB]"; echo "0, Fake GPU 0, 40960 MiB" ;;
    *) exit 1 ;;
esac
SMI
        printf '#!/bin/sh\n[ "$1" = -d ] && exit 0\ncat >/dev/null\n' >"$fake/nvidia-cuda-mps-control"
        chmod 755 "$fake/nvidia-smi" "$fake/nvidia-cuda-mps-control"
        PATH=$fake:$PATH LD_LIBRARY_PATH=$fake timeout 290 "$dir/gpu-check" --no-torch \
            --time-scale 10 >"$tmp/run.out" 2>&1
        rc=$?
        cat "$tmp/run.out"
        (( rc == 0 )) || fail "DIR/gpu-check against the fake driver exited $rc"
        for want in "--- ok: carma-fakejob --cuda alone" \
            "--exclude-gpus 1" \
            "--- ok: default: a pair that shares the GPU" \
            "--- ok: default: a pair that runs out of memory" \
            "--- ok: mps: a pair that runs out of memory" \
            "--- ok: default: a foreign process is shown and respected" \
            "--- ok: default: a task in another PID namespace teaches no 0 MiB" \
            "--- ok: default: a task over its host memory is stopped alone" \
            "--- ok: default: the daemon survives and accounts what the fences counted" \
            "--- ok: mps: two users do not wait behind each other's MPS server" \
            "--- ok: mps: the memory limit by device ordinal stops an allocation beyond it" \
            "on CUDA GPU(s)" \
            "attempt 1 was seen, peak" \
            "torch.OutOfMemoryError: CUDA out of memory" \
            " 0 failed,"; do
            grep -q -F -- "$want" "$tmp/run.out" || fail "the run's output lacks '$want'"
        done
        ;;
    *)
        fail "unknown mode $mode"
        ;;
esac
