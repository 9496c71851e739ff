#include "core/mail.h"

#include <gtest/gtest.h>

namespace carma {
namespace {

// This test verifies sbatch's --mail-type words as CARMA reads them, and that an unknown one is
// named with the words it takes.
TEST(MailTest, ReadsMailTypes) {
    EXPECT_EQ(*parse_mail_types("BEGIN,END"), mail::kBegin | mail::kEnd);
    EXPECT_EQ(*parse_mail_types("fail"), mail::kFail);
    EXPECT_EQ(*parse_mail_types("NONE"), 0u);
    EXPECT_EQ(format_mail_types(*parse_mail_types("ALL")), "BEGIN,END,FAIL,REQUEUE,TIME_LIMIT");
    EXPECT_EQ(format_mail_types(*parse_mail_types("END,ARRAY_TASKS")), "END,ARRAY_TASKS");
    auto bad = parse_mail_types("END,STAGE_OUT");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("'STAGE_OUT'"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find("TIME_LIMIT"), std::string::npos) << bad.error().message;
}

// This test verifies which --mail-user values may reach sendmail's command line, and that a
// task's name or message cannot add a header to the mail.
TEST(MailTest, AddressesAndMessagesCannotInject) {
    EXPECT_TRUE(plausible_mail_address("alice"));
    EXPECT_TRUE(plausible_mail_address("alice@lab.example.org"));
    for (const char* bad : {"", "-oQ/tmp", "a b@x", "a,b@x", "a@b@c", "a\n@x", "<a@x>"}) {
        EXPECT_FALSE(plausible_mail_address(bad)) << bad;
    }
    const std::string m = mail_message(
        {"alice", "task 12 (x\nBcc: eve@x)", "ended failed", "exit code 1\r\nBcc: eve", "gpu1"});
    EXPECT_EQ(m.find("\nBcc"), std::string::npos) << m;
    EXPECT_NE(m.find("To: alice\nSubject: CARMA task 12 (x Bcc: eve@x) ended failed\n"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("\n\ntask 12"), std::string::npos) << m;
}

}  // namespace
}  // namespace carma
