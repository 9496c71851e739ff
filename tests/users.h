#pragma once
// Users a test makes to check what other users may do: root is needed, and useradd makes each
// user once (no home, /bin/sh); later tests find it.

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace carma::test_support {

// The user `name`, made when it does not exist yet; nothing when useradd cannot make it.
inline std::optional<passwd> ensure_user(const std::string& name) {
    if (::getpwnam(name.c_str()) == nullptr) {
        const std::string cmd =
            "useradd --no-create-home --shell /bin/sh " + name + " >/dev/null 2>&1";
        if (std::system(cmd.c_str()) != 0) {
            return std::nullopt;
        }
    }
    const passwd* pw = ::getpwnam(name.c_str());
    return pw != nullptr ? std::optional<passwd>(*pw) : std::nullopt;
}

// For a test that needs root and the user `name` (`why` ends "needs root ..."): fails the test,
// fatally, naming what is missing. Call it under ASSERT_NO_FATAL_FAILURE.
inline void root_and_user(const std::string& name, std::optional<passwd>& user, const char* why) {
    ASSERT_EQ(::geteuid(), 0u) << "needs root " << why;
    user = ensure_user(name);
    ASSERT_TRUE(user) << "useradd could not create " << name;
}

}  // namespace carma::test_support
