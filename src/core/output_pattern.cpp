#include "core/output_pattern.h"

#include <cctype>
#include <filesystem>

#include <fmt/format.h>

namespace carma {

namespace {

constexpr std::string_view kCodes = "jAaxu%";
constexpr std::size_t kMaxPad = 10;

struct Code {
    char letter = 0;
    std::size_t pad = 0;
    std::size_t end = 0;  // just past the letter
};

// The code that starts at `at` (a '%'); letter 0 when there is none.
Code read_code(std::string_view s, std::size_t at) {
    Code c;
    std::size_t i = at + 1;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0 && c.pad <= kMaxPad) {
        c.pad = c.pad * 10 + static_cast<std::size_t>(s[i] - '0');
        ++i;
    }
    if (i < s.size()) {
        c.letter = s[i];
        c.end = i + 1;
    }
    return c;
}

std::string padded(long long value, std::size_t pad) {
    return fmt::format("{:0{}}", value, pad);
}

}  // namespace

Result<void> check_output_pattern(std::string_view pattern, std::string_view option) {
    auto bad = [&](std::string_view why) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} '{}' {}; sbatch's codes CARMA fills: %j (task id), %A (array "
                                "id), %a (array index), %x (name), %u (user), %% (a '%')",
                                option, pattern, why));
    };
    if (pattern.empty()) {
        return bad("is empty");
    }
    if (pattern.find('\0') != std::string_view::npos) {
        return bad("contains a NUL character");
    }
    for (std::size_t i = pattern.find('%'); i != std::string_view::npos;
         i = pattern.find('%', i)) {
        const Code c = read_code(pattern, i);
        if (c.letter == 0) {
            return bad("ends in an unfinished '%' code");
        }
        if (c.pad > kMaxPad) {
            return bad(fmt::format("pads to more than {} digits", kMaxPad));
        }
        if (kCodes.find(c.letter) == std::string_view::npos) {
            return bad(fmt::format("has the code %{}, which CARMA does not fill", c.letter));
        }
        i = c.end;
    }
    return {};
}

std::string expand_output_pattern(std::string_view pattern, const OutputNames& names) {
    std::string out;
    for (std::size_t i = 0; i < pattern.size();) {
        if (pattern[i] != '%') {
            out += pattern[i++];
            continue;
        }
        const Code c = read_code(pattern, i);
        switch (c.letter) {
            case 'j': out += padded(names.id, c.pad); break;
            case 'A': out += padded(names.array ? names.array->id : names.id, c.pad); break;
            case 'a': out += padded(names.array ? names.array->index : 0, c.pad); break;
            case 'x': out += names.name; break;
            case 'u': out += names.user; break;
            case '%': out += '%'; break;
            default: out += pattern.substr(i, c.end - i); break;  // unchecked: left as written
        }
        i = c.end == 0 ? pattern.size() : c.end;
    }
    return out;
}

OutputFiles output_files(std::string_view output, std::string_view error,
                         const OutputNames& names, std::string_view workdir) {
    auto path = [&](std::string_view pattern) -> std::string {
        if (pattern.empty()) {
            return {};
        }
        const std::filesystem::path p(expand_output_pattern(pattern, names));
        return (p.is_absolute() ? p : std::filesystem::path(workdir) / p)
            .lexically_normal()
            .string();
    };
    OutputFiles out{path(output), path(error)};
    if (out.stderr_path.empty()) {
        out.stderr_path = out.stdout_path;
    }
    return out;
}

std::vector<OutputDirectory> output_directories(std::string_view output, std::string_view error,
                                                std::string_view name, std::string_view user,
                                                std::string_view workdir) {
    std::vector<OutputDirectory> out;
    auto add = [&](std::string_view option, std::string_view pattern) {
        if (pattern.empty()) {
            return;
        }
        const std::size_t slash = pattern.rfind('/');
        const std::string_view part =
            slash == std::string_view::npos ? std::string_view() : pattern.substr(0, slash + 1);
        for (std::size_t i = part.find('%'); i != std::string_view::npos; i = part.find('%', i)) {
            const Code c = read_code(part, i);
            if (c.letter == 'j' || c.letter == 'A' || c.letter == 'a') {
                return;
            }
            i = c.end == 0 ? part.size() : c.end;
        }
        const std::filesystem::path p(
            expand_output_pattern(part, OutputNames{0, std::nullopt, std::string(name),
                                                    std::string(user)}));
        std::string dir = (p.is_absolute() ? p : std::filesystem::path(workdir) / p)
                              .lexically_normal()
                              .string();
        if (dir.size() > 1 && dir.back() == '/') {
            dir.pop_back();
        }
        for (const OutputDirectory& known : out) {
            if (known.dir == dir) {
                return;
            }
        }
        out.push_back({std::string(option), std::string(pattern), std::move(dir)});
    };
    add("--output", output);
    add("--error", error);
    return out;
}

}  // namespace carma
