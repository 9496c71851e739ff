// A batch script's copy from the API's body to the store (core/task.h's `script`): the body's
// `script` is checked against the command it stands in, counted in what the task stores, kept by
// the store's codec, and shown in a task's view by size only.

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/task_json.h"
#include "store/codecs.h"

namespace carma::daemon {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

json body_with(json script) {
    return {{"command", {"/bin/bash", "/home/a/train.sbatch", "--lr", "0.1"}},
            {"workdir", "/home/a"},
            {"script", std::move(script)}};
}

// This test verifies that a copy is taken with the index of the path it stands in, kept by the
// store, counted in the task's bytes, and shown in a view as its index and size, not its text.
TEST(ScriptSubmit, ACopyIsKeptCountedAndShownBySize) {
    const std::string text = "#!/bin/bash\n#SBATCH -J sweep\npython3 train.py \"$@\"\n";
    auto t = task_from_submission(body_with({{"text", text}, {"arg", 1}}));
    ASSERT_TRUE(t) << t.error().message;
    EXPECT_EQ(t->spec.script, text);
    EXPECT_EQ(t->spec.script_arg, 1u);
    const TaskSpec back = store::detail::spec_from_json(store::detail::spec_to_json(t->spec));
    EXPECT_EQ(back.script, text);
    EXPECT_EQ(back.script_arg, 1u);
    const json view = task_to_json(*t);
    EXPECT_EQ(view["script"], json({{"arg", 1}, {"bytes", text.size()}}));
    auto plain = task_from_submission(body_with(nullptr));
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_TRUE(task_to_json(*plain)["script"].is_null());
    EXPECT_EQ(submission_bytes(*t), submission_bytes(*plain) + text.size());
    EXPECT_TRUE(store::detail::spec_from_json(store::detail::spec_to_json(plain->spec))
                    .script.empty());
}

// This test verifies that a copy that is not {text, arg}, is empty or holds NUL, or stands in
// the program or past the command's end is refused with what to send instead.
TEST(ScriptSubmit, AMalformedCopyIsRefused) {
    const struct {
        json script;
        const char* says;
    } cases[] = {
        {"echo hi", "'script' must be {\"text\""},
        {{{"text", "echo hi"}}, "'script' must be {\"text\""},
        {{{"text", "echo hi"}, {"arg", 1}, {"path", "x"}}, "'script' must be {\"text\""},
        {{{"text", ""}, {"arg", 1}}, "'script.text' must be the script's text"},
        {{{"text", std::string("a\0b", 3)}, {"arg", 1}}, "without NUL"},
        {{{"text", 7}, {"arg", 1}}, "'script.text'"},
        {{{"text", "echo hi"}, {"arg", 0}}, "from 1 to 3"},
        {{{"text", "echo hi"}, {"arg", 4}}, "from 1 to 3"},
        {{{"text", "echo hi"}, {"arg", "1"}}, "'script.arg'"},
    };
    for (const auto& c : cases) {
        auto t = task_from_submission(body_with(c.script));
        ASSERT_FALSE(t) << c.script.dump();
        EXPECT_EQ(t.error().status, 400) << c.script.dump();
        EXPECT_THAT(t.error().message, HasSubstr(c.says)) << c.script.dump();
    }
}

}  // namespace
}  // namespace carma::daemon
