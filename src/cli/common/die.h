#pragma once
// Where a command meets an error it cannot go on after: it throws, and the program's main prints
// the message and exits with status 1. Result<T> inside, an exception at this edge.

#include <stdexcept>
#include <string>
#include <utility>

#include "core/result.h"

namespace carma::cli {

[[noreturn]] inline void die(const std::string& message) { throw std::runtime_error(message); }

// The value, or die with the error's message.
template <typename T>
T or_die(Result<T> r) {
    if (!r) {
        die(r.error().message);
    }
    return std::move(*r);
}

inline void or_die(Result<void> r) {
    if (!r) {
        die(r.error().message);
    }
}

}  // namespace carma::cli
