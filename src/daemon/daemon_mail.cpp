// --mail-type and --mail-user, as sbatch takes them: mails through the local sendmail when a task
// starts, is relaunched after running out of memory, and ends. An array without ARRAY_TASKS is
// mailed as a whole: when its first member starts, and once every member has ended.

#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/mail.h"
#include "core/task_ref.h"
#include "core/text.h"
#include "daemon/daemon.h"
#include "daemon/daemon_api.h"
#include "exec/run_program.h"

namespace carma::daemon {

namespace {

constexpr double kSendmailTimeoutS = 60;

std::string host_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("?");
}

// The mail runs beside the daemon's loop: sendmail may take its time, and a mail that is lost
// is logged, never in the way of scheduling.
void send_mail(const std::string& sendmail, const MailNote& note) {
    const std::vector<std::string> argv = {sendmail, "-oi", "--", note.to};
    const std::string message = mail_message(note);
    std::thread([argv, message] {
        exec::ProgramOptions options;
        options.input = message;
        options.timeout_s = kSendmailTimeoutS;
        auto run = exec::run_program(argv, options);
        if (!run || !run->succeeded()) {
            spdlog::warn("mail to {}: {} {}", argv.back(), exec::command_text(argv),
                         run ? run->how_it_ended(kSendmailTimeoutS) : run.error().message);
        }
    }).detach();
}

}  // namespace

api::ApiResult<void> Daemon::check_mail(const api::Caller& caller, TaskSpec& spec) const {
    if (::access(config_.sendmail.c_str(), X_OK) != 0) {
        return api::api_fail(400, fmt::format(
                                      "--mail-type needs a local sendmail, and this server has "
                                      "none at {} ({}); leave --mail-type out, or ask the "
                                      "admin to install a mail transfer agent (Debian: "
                                      "exim4-daemon-light, postfix or msmtp-mta) or to set "
                                      "`sendmail:` in the daemon's config",
                                      config_.sendmail, errno_text(errno)));
    }
    if (spec.mail_user.empty()) {
        spec.mail_user = caller.user;  // as sbatch: the submitter
    }
    return {};
}

void Daemon::mail_about(const store::TaskRow& task, MailMoment moment) {
    const unsigned types = task.spec.mail_types;
    if (types == 0) {
        return;
    }
    const bool whole_array = task.spec.array && (types & mail::kArrayTasks) == 0;
    MailNote note{task.spec.mail_user,
                  fmt::format("task {} ({})", format_task_id(task.id, task.spec.array),
                              task.spec.name),
                  "", task.message, host_name()};
    const bool failed = task.state != store::TaskState::Succeeded;
    switch (moment) {
        case MailMoment::Began:
            if ((types & mail::kBegin) == 0 || (whole_array && task.id != task.spec.array->id)) {
                return;
            }
            note.event = "began";
            break;
        case MailMoment::Relaunched:
            if ((types & mail::kRequeue) == 0 || whole_array) {
                return;
            }
            note.event = "is relaunched";
            break;
        case MailMoment::Ended: {
            const bool timeout = task.state == store::TaskState::Timeout;
            if ((types & mail::kEnd) == 0 && !((types & mail::kFail) != 0 && failed) &&
                !((types & mail::kTimeLimit) != 0 && timeout)) {
                if (!whole_array) {
                    return;  // an array's FAIL may still come from another member
                }
            }
            note.event = fmt::format("ended {}", store::to_string(task.state));
            if (!whole_array) {
                break;
            }
            auto members = store_->array_members(task.spec.array->id);
            if (!members) {
                spdlog::warn("task={}: no mail about its array: {}", task.id,
                             members.error().message);
                return;
            }
            std::map<std::string, int> counts;
            bool any_failed = false;
            for (const store::ArrayMemberRow& m : *members) {
                if (!store::is_final(m.state)) {
                    return;  // the last member to end mails
                }
                ++counts[std::string(store::to_string(m.state))];
                any_failed = any_failed || m.state != store::TaskState::Succeeded;
            }
            if ((types & mail::kEnd) == 0 && !((types & mail::kFail) != 0 && any_failed)) {
                return;
            }
            std::vector<std::string> parts;
            for (const auto& [state, n] : counts) {
                parts.push_back(fmt::format("{} {}", n, state));
            }
            note.task = fmt::format("array {} ({})", task.spec.array->id, task.spec.name);
            note.event = "ended";
            note.details = fmt::format("{} member(s): {}", members->size(), fmt::join(parts, ", "));
            break;
        }
    }
    send_mail(config_.sendmail, note);
}

}  // namespace carma::daemon
