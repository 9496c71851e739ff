#pragma once
// What the NVML backend's tests share: a fixture that points the backend at the fake NVML
// (tests/fake_nvml/fake_nvml.c) and clears the fake's knobs before and after every test. The
// DCGM backend's tests derive from it too (over the fake DCGM), and share its checks through
// open_fake().

#include <cstdlib>
#include <functional>
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

    // The backend under test on the fakes (here NVML); nullptr, the test failed, when it does
    // not open.
    virtual std::unique_ptr<GpuBackend> open_fake() {
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
    std::vector<GpuSample> first_sample() {
        auto backend = open_fake();
        return backend ? sample(*backend) : std::vector<GpuSample>{};
    }

    // Two samples of one freshly opened backend, one after the other, each of both GPUs. Its
    // failures are fatal: call it inside ASSERT_NO_FATAL_FAILURE.
    void two_samples(std::vector<GpuSample>& first, std::vector<GpuSample>& second) {
        auto backend = open_fake();
        ASSERT_NE(backend, nullptr);
        first = sample(*backend);
        second = sample(*backend);
        ASSERT_EQ(first.size(), 2U);
        ASSERT_EQ(second.size(), 2U);
    }

    // Three times over: two backends open at once, the first closed again, the second sampled;
    // the sample lists both GPUs, GPU 0 without an error, and passes the backend's own `check`.
    // Its failures are fatal: call it inside ASSERT_NO_FATAL_FAILURE.
    void open_two_close_one(
        const std::function<void(const std::vector<GpuSample>&)>& check = nullptr) {
        for (int i = 0; i < 3; ++i) {
            auto a = open_fake();
            auto b = open_fake();
            ASSERT_NE(a, nullptr);
            ASSERT_NE(b, nullptr);
            a.reset();
            const auto samples = sample(*b);
            ASSERT_EQ(samples.size(), 2U);
            EXPECT_EQ(samples[0].error, "");
            if (check) {
                check(samples);
            }
        }
    }
};

}  // namespace carma::device::fake_nvml
