#pragma once
// sbatch's --mail-type and --mail-user: which moments of a task are mailed, and the message
// sendmail gets. Pure: the daemon runs sendmail.

#include <string>
#include <string_view>

#include "core/result.h"
#include "core/task_id.h"

namespace carma {

// Bits of --mail-type. ALL is BEGIN, END, FAIL, REQUEUE and TIME_LIMIT; ARRAY_TASKS mails each
// member of an array (without it an array is mailed as a whole: when its first member starts,
// and once every member has ended).
namespace mail {
inline constexpr unsigned kBegin = 1;       // an attempt starts (the first, or one after OOM)
inline constexpr unsigned kEnd = 2;         // the task ended, however
inline constexpr unsigned kFail = 4;        // the task ended without succeeding
inline constexpr unsigned kRequeue = 8;     // an attempt ran out of memory: relaunched
inline constexpr unsigned kTimeLimit = 16;  // stopped at its time limit
inline constexpr unsigned kArrayTasks = 32;
}  // namespace mail

// "BEGIN,END", "FAIL", "ALL", "NONE" (0), case-insensitive; an unknown word is named with the
// ones CARMA takes.
Result<unsigned> parse_mail_types(std::string_view text);
// As parse_mail_types reads it back: "BEGIN,END,FAIL".
std::string format_mail_types(unsigned types);

// Whether --mail-user is an address sendmail may be given as an argument: a user name or
// user@host, without white space, quotes, commas or control characters.
bool plausible_mail_address(std::string_view address);

// One mail: what happened to which task.
struct MailNote {
    std::string to;
    std::string task;     // "task 12 (train)", "array 138 (sweep)", as views write ids
    std::string event;    // "began", "ended succeeded", ...
    std::string details;  // the task's message, the counts of an array's members
    std::string host;
};
// The message as `sendmail -oi -- ADDRESS` reads it: headers, a blank line, the body. The
// users' text in it (task names, messages) is kept to one line each, so it cannot add headers.
std::string mail_message(const MailNote& note);

}  // namespace carma
