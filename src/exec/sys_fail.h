#pragma once
// A failed system call as an Error: what was being done, then the errno's text (core/text.h).

#include <string_view>

#include <fmt/format.h>

#include "core/result.h"
#include "core/text.h"

namespace carma::exec {

inline tl::unexpected<Error> sys_fail(std::string_view what, int err) {
    return fail(ErrorCode::Io, fmt::format("{}: {}", what, errno_text(err)));
}

}  // namespace carma::exec
