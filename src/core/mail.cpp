#include "core/mail.h"

#include <array>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/text.h"

namespace carma {

namespace {

constexpr std::array<std::pair<std::string_view, unsigned>, 6> kMailTypes = {{
    {"BEGIN", mail::kBegin},
    {"END", mail::kEnd},
    {"FAIL", mail::kFail},
    {"REQUEUE", mail::kRequeue},
    {"TIME_LIMIT", mail::kTimeLimit},
    {"ARRAY_TASKS", mail::kArrayTasks},
}};

constexpr unsigned kAll = mail::kBegin | mail::kEnd | mail::kFail | mail::kRequeue |
                          mail::kTimeLimit;

// One line: a header or body line that cannot start another header.
std::string one_line(std::string_view text) {
    std::string out;
    for (char c : text) {
        out += (c == '\n' || c == '\r' || static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    return out;
}

}  // namespace

Result<unsigned> parse_mail_types(std::string_view text) {
    unsigned types = 0;
    for (const std::string& raw : split_list(text, ',')) {
        const std::string word = to_lower(trim(raw));
        if (word == "none") {
            continue;
        }
        if (word == "all") {
            types |= kAll;
            continue;
        }
        bool known = false;
        for (const auto& [name, bit] : kMailTypes) {
            if (word == to_lower(name)) {
                types |= bit;
                known = true;
            }
        }
        if (!known) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--mail-type '{}' names '{}', which CARMA does not mail; it "
                                    "takes NONE, BEGIN, END, FAIL, REQUEUE, TIME_LIMIT, "
                                    "ARRAY_TASKS and ALL, joined by ','",
                                    text, trim(raw)));
        }
    }
    return types;
}

std::string format_mail_types(unsigned types) {
    std::vector<std::string_view> names;
    for (const auto& [name, bit] : kMailTypes) {
        if ((types & bit) != 0) {
            names.push_back(name);
        }
    }
    return names.empty() ? "NONE" : fmt::format("{}", fmt::join(names, ","));
}

bool plausible_mail_address(std::string_view address) {
    if (address.empty() || address.size() > 254 || address.front() == '-') {
        return false;  // '-' would read as an option of sendmail's
    }
    for (char c : address) {
        const auto u = static_cast<unsigned char>(c);
        if (u <= 0x20 || u == 0x7f || c == '"' || c == ',' || c == ';' || c == '<' ||
            c == '>' || c == '\\' || c == '(' || c == ')') {
            return false;
        }
    }
    return address.find('@') == address.rfind('@');
}

std::string mail_message(const MailNote& note) {
    const std::string subject = one_line(fmt::format("CARMA {} {}", note.task, note.event));
    return fmt::format("To: {}\nSubject: {}\nAuto-Submitted: auto-generated\n\n{} {} on {}.\n{}\n",
                       one_line(note.to), subject, one_line(note.task), one_line(note.event),
                       one_line(note.host), one_line(note.details));
}

}  // namespace carma
