#pragma once
// What the NVML backend's tests share: a fixture that points the backend at the fake NVML
// (tests/fake_nvml/fake_nvml.c) and clears the fake's knobs before and after every test.

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "device/nvml.h"

// The build points these at the fake NVML libraries built from tests/fake_nvml/fake_nvml.c.
#ifndef CARMA_FAKE_NVML_PATH
#error "CARMA_FAKE_NVML_PATH must name the fake NVML library (libfake-nvml.so)"
#endif

extern char** environ;  // POSIX: declared by no standard header

namespace carma::device::fake_nvml {

inline void set_env(const std::string& name, const std::string& value) {
    ::setenv(name.c_str(), value.c_str(), 1);
}

// Every variable starting with `prefix`, whatever its name (some carry a GPU index).
inline void clear_knobs(std::string_view prefix) {
    std::vector<std::string> names;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string text(*entry);
        if (text.starts_with(prefix)) {
            names.push_back(text.substr(0, text.find('=')));
        }
    }
    for (const std::string& name : names) {
        ::unsetenv(name.c_str());
    }
}

// Every test starts from the fake NVML with its default GPUs, and leaves no knob behind.
class FakeNvmlTest : public ::testing::Test {
protected:
    void SetUp() override {
        clear_knobs("FAKE_NVML_");
        set_env(kNvmlLibraryEnv, CARMA_FAKE_NVML_PATH);
    }
    void TearDown() override {
        clear_knobs("FAKE_NVML_");
        ::unsetenv(kNvmlLibraryEnv);
    }

    static std::unique_ptr<GpuBackend> open_fake() {
        auto backend = open_nvml();
        if (!backend) {
            ADD_FAILURE() << backend.error().message;
            return nullptr;
        }
        return std::move(*backend);
    }

    // sample() never fails as a whole: a failure here is a failure of the test.
    static std::vector<GpuSample> sample(GpuBackend& backend) {
        auto samples = backend.sample();
        if (!samples) {
            ADD_FAILURE() << samples.error().message;
            return {};
        }
        return std::move(*samples);
    }

    // One sample of a freshly opened backend; empty (the test has failed) when it cannot open.
    static std::vector<GpuSample> first_sample() {
        auto backend = open_fake();
        return backend ? sample(*backend) : std::vector<GpuSample>{};
    }
};

}  // namespace carma::device::fake_nvml
