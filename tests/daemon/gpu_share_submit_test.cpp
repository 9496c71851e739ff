// `--gpu-share` from the API's body to the attempt's environment (core/gpu_share.h): the body's
// `gpu_share` is checked and kept in thousandths, shown back as a fraction, survives the store's
// codec, and under MPS becomes the client's CUDA_MPS_ACTIVE_THREAD_PERCENTAGE.

#include <map>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/task_environment.h"
#include "daemon/task_json.h"
#include "store/codecs.h"

namespace carma::daemon {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json body_with(json extra) {
    json body = {{"command", {"python3", "train.py"}}, {"workdir", "/tmp"}};
    for (auto& [k, v] : extra.items()) {
        body[k] = v;
    }
    return body;
}

// This test verifies that a share is read into thousandths and shown back as the fraction given,
// and that the store keeps it.
TEST(GpuShareSubmit, AShareIsKeptInThousandthsAndShownAsGiven) {
    auto t = task_from_submission(body_with({{"gpu_share", 0.25}}));
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->spec.gpu_milli, 250);
    EXPECT_EQ(task_to_json(*t)["gpu_share"], 0.25);
    EXPECT_TRUE(task_to_json(*task_from_submission(body_with({})))["gpu_share"].is_null());
    const TaskSpec back = store::detail::spec_from_json(store::detail::spec_to_json(t->spec));
    EXPECT_EQ(back.gpu_milli, 250);
}

// This test verifies the refusals: not a number, 0 or 1 and beyond, finer than a thousandth, a
// share with other than one GPU, and a share that is also exclusive — each naming what to do.
TEST(GpuShareSubmit, WhatIsNotAShareOfOneGpuIsRefusedWithWhatToDo) {
    struct Case {
        json extra;
        const char* says;
    };
    const Case cases[] = {
        {{{"gpu_share", "half"}}, "'gpu_share' must be a number above 0 and below 1"},
        {{{"gpu_share", 0}}, "is not above 0"},
        {{{"gpu_share", 1}}, "is not below 1"},
        {{{"gpu_share", 2.5}}, "for whole GPUs use --gpus N"},
        {{{"gpu_share", 0.0001}}, "finer than a thousandth"},
        {{{"gpu_share", 0.5}, {"gpus", 2}}, "'gpus' is 2; ask for 1 GPU with a share"},
        {{{"gpu_share", 0.5}, {"gpus", 0}}, "'gpus' is 0"},
        {{{"gpu_share", 0.5}, {"exclusive", true}}, "drop one of them"},
    };
    for (const Case& c : cases) {
        auto t = task_from_submission(body_with(c.extra));
        ASSERT_FALSE(t) << c.extra.dump();
        EXPECT_EQ(t.error().status, 400) << c.extra.dump();
        EXPECT_THAT(t.error().message, HasSubstr(c.says)) << c.extra.dump();
    }
}

// This test verifies the enforcement as NVIDIA documents it: an MPS client with a share gets
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (whole percent, rounded up); a whole-GPU client and a share
// outside MPS get none (nothing there would read it), and a submitter's own value never passes.
TEST(GpuShareSubmit, AnMpsClientsShareBecomesItsThreadPercentage) {
    store::TaskRow t;
    t.id = 7;
    t.user = "ann";
    t.spec.gpu_milli = 333;
    t.env = {{"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"}};
    AttemptPlace mps;
    mps.mps_pipe_dir = "/state/mps/0";
    auto value_of = [](const EnvList& env) {
        std::map<std::string, std::string> m(env.begin(), env.end());
        auto it = m.find("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
        return it == m.end() ? std::string("unset") : it->second;
    };
    EXPECT_EQ(value_of(task_environment(t, mps)), "34");
    AttemptPlace outside;
    outside.mps_off_dir = "/state/no-mps";
    EXPECT_EQ(value_of(task_environment(t, outside)), "unset");
    t.spec.gpu_milli = 0;
    EXPECT_EQ(value_of(task_environment(t, mps)), "unset");
}

}  // namespace
}  // namespace carma::daemon
