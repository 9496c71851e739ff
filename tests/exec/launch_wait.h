#pragma once
// Launching an attempt in a test and waiting for its end, shared by the exec tests.

#include <optional>

#include <gtest/gtest.h>

#include "exec/launch.h"
#include "support.h"

#ifndef CARMA_SHIM_PATH
#error "CARMA_SHIM_PATH must name the carma-shim executable"
#endif

namespace carma::exec {

// Launches `request` with the built carma-shim and waits for its exit.json; a (non-fatal) test
// failure when either does not happen.
inline std::optional<ExitRecord> launch_and_wait(const LaunchRequest& request) {
    auto handle = launch(request, CARMA_SHIM_PATH);
    if (!handle) {
        ADD_FAILURE() << "launch: " << handle.error().message;
        return std::nullopt;
    }
    std::optional<ExitRecord> record;
    if (!test_support::eventually(
            [&] { return (record = read_exit(handle->attempt_dir)).has_value(); })) {
        ADD_FAILURE() << "no exit.json in " << handle->attempt_dir;
    }
    return record;
}

}  // namespace carma::exec
