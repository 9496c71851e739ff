#pragma once
// The error discipline inside CARMA: functions that can fail return Result<T>; exceptions are
// only thrown and caught at the edges (CLI, config loading, HTTP handlers).

#include <string>
#include <string_view>
#include <utility>

#include <tl/expected.hpp>

namespace carma {

enum class ErrorCode {
    InvalidArgument,  // the caller gave something malformed; the message says what and how to fix it
    NotFound,         // a named object (task, policy, trace, profile) does not exist
    Infeasible,       // can never be satisfied on this server (more GPUs or memory than exist)
    Io,               // a file or socket operation failed; the message names the path
    Forbidden,        // the caller may not do this (another node's report, a refused identity)
    Conflict,         // clashes with what holds now (a second live agent of one node)
    Internal,         // a broken invariant: a bug in CARMA
};

// Adding a code means adding its name here in the same change.
constexpr std::string_view to_string(ErrorCode code) {
    switch (code) {
        case ErrorCode::InvalidArgument: return "invalid argument";
        case ErrorCode::NotFound: return "not found";
        case ErrorCode::Infeasible: return "infeasible";
        case ErrorCode::Io: return "i/o error";
        case ErrorCode::Forbidden: return "forbidden";
        case ErrorCode::Conflict: return "conflict";
        case ErrorCode::Internal: return "internal error";
    }
    return "unknown error";
}

struct Error {
    ErrorCode code = ErrorCode::Internal;
    std::string message;  // names the object involved and, where possible, what to do
};

template <typename T>
using Result = tl::expected<T, Error>;

inline tl::unexpected<Error> fail(ErrorCode code, std::string message) {
    return tl::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace carma
