#include "core/failure_reason.h"

#include <vector>

#include "core/text.h"

namespace carma {

namespace {

// A line a reader learns nothing from: markers under a traceback's code (`    ^^^^^^`),
// separators, and the headers and frames of a Python traceback, which always come before the
// line that names the error.
bool says_nothing(std::string_view line) {
    if (line.starts_with("Traceback (most recent call last)") || line.starts_with("File \"") ||
        line.starts_with("During handling of the above exception") ||
        line.starts_with("The above exception was the direct cause")) {
        return true;
    }
    for (std::size_t i = 0; i < line.size();) {
        const Utf8Char c = decode_utf8(line, i);
        i += c.bytes;
        const bool ascii_word = (c.value >= '0' && c.value <= '9') ||
                                (c.value >= 'A' && c.value <= 'Z') ||
                                (c.value >= 'a' && c.value <= 'z');
        // Beyond ASCII, box drawing and blocks (U+2500-U+259F: rich's traceback frames) say
        // nothing; letters of other scripts do.
        const bool other_word = c.value >= 0x80 && c.value != kInvalidCodePoint &&
                                !(c.value >= 0x2500 && c.value <= 0x259F);
        if (ascii_word || other_word) {
            return false;
        }
    }
    return true;  // only punctuation and spaces
}

// Control characters (escape sequences of coloured output among them) dropped; tabs as spaces.
std::string without_controls(std::string_view line) {
    std::string out;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const auto u = static_cast<unsigned char>(line[i]);
        if (u == 0x1b && i + 1 < line.size() && line[i + 1] == '[') {
            // CSI: ESC [ parameters, then one final byte in @..~.
            std::size_t j = i + 2;
            while (j < line.size() && !(line[j] >= '@' && line[j] <= '~')) {
                ++j;
            }
            i = j;
            continue;
        }
        if (u == '\t') {
            out += ' ';
        } else if (u >= 0x20 && u != 0x7f) {
            out += line[i];
        }
    }
    return out;
}

}  // namespace

std::string last_meaningful_line(std::string_view stderr_tail) {
    std::vector<std::string_view> lines;
    while (!stderr_tail.empty()) {
        const std::size_t end = stderr_tail.find('\n');
        lines.push_back(stderr_tail.substr(0, end));
        if (end == std::string_view::npos) {
            break;
        }
        stderr_tail.remove_prefix(end + 1);
    }
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
        std::string_view line = *it;
        // A progress bar redraws its line after '\r': what it drew last is what shows.
        while (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        if (const std::size_t cr = line.rfind('\r'); cr != std::string_view::npos) {
            line.remove_prefix(cr + 1);
        }
        const std::string clean = without_controls(line);
        const std::string_view text = trim(clean);
        if (text.empty() || says_nothing(text)) {
            continue;
        }
        return shortened(text, kMaxFailureReasonBytes, "...");
    }
    return {};
}

std::string fence_denial(std::string_view stderr_tail) {
    const auto has = [&](std::string_view s) { return stderr_tail.find(s) != std::string_view::npos; };
    if (has("/dev/nvidia") && (has("Operation not permitted") || has("EPERM"))) {
        return "a GPU device file it was not given is fenced off (its own GPUs are in "
               "CUDA_VISIBLE_DEVICES)";
    }
    const bool no_more = has("Resource temporarily unavailable") || has("EAGAIN");
    if ((no_more && (has("fork") || has("thread") || has("spawn"))) ||
        has("can't start new thread")) {
        return "it reached its fence's limit of processes and threads (host.pids_max)";
    }
    return {};
}

}  // namespace carma
