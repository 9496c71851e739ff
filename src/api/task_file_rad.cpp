// The paper's .rad task files (api/task_file.h, carma-spec.md §1.4): fixed line numbers for the
// environment, the command, the GPU count and the memory figures, read the way the original
// server read them.

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "api/task_file_internal.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::api {

namespace {

constexpr int kMaxGpusPerTask = 1024;  // the daemon refuses more (task_json.cpp)

// 0-based line numbers of the .rad format (carma-spec.md §1.4).
constexpr std::size_t kRadEnvironment = 1;  // "conda activate tf"
constexpr std::size_t kRadFirstCommandLine = 2;
constexpr std::size_t kRadGpus = 7;
constexpr std::size_t kRadOracle = 8;
constexpr std::size_t kRadHorus = 9;
constexpr std::size_t kRadFakeTensor = 10;
constexpr std::size_t kRadGpuMemNet = 11;
constexpr std::size_t kRadLines = 12;

std::vector<std::string_view> split_lines(std::string_view text) {
    std::vector<std::string_view> lines;
    while (!text.empty()) {
        const std::size_t end = text.find('\n');
        std::string_view line = text.substr(0, end);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        lines.push_back(line);
        if (end == std::string_view::npos) {
            break;
        }
        text.remove_prefix(end + 1);
    }
    return lines;
}

// Python's int(float(line)): "28923.25" -> 28923. Blank or missing lines are "not given".
// `limit` (with `limit_text` naming it in the error) keeps the value within what the field can
// mean, so that later sums (need + margin) cannot overflow.
Result<std::optional<std::int64_t>> rad_number(const std::vector<std::string_view>& lines,
                                               std::size_t index, std::string_view what,
                                               double limit, std::string_view limit_text,
                                               const TaskFileContext& ctx) {
    if (index >= lines.size() || trim(lines[index]).empty()) {
        return std::optional<std::int64_t>();
    }
    std::string_view text = trim(lines[index]);
    if (text.front() == '+') {
        text.remove_prefix(1);
    }
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool whole = ec == std::errc() && ptr == text.data() + text.size();
    if (!whole || !std::isfinite(value) || value < 0) {
        return error_at(
            ctx, static_cast<int>(index),
            fmt::format("expected {} as a non-negative number, got '{}'", what, lines[index]));
    }
    if (value > limit) {
        return error_at(ctx, static_cast<int>(index),
                        fmt::format("{} is {}; it must be at most {}", what, lines[index],
                                    limit_text));
    }
    return std::optional<std::int64_t>(static_cast<std::int64_t>(std::trunc(value)));
}

// The original ran the line through bash; keep that only where the line needs a shell.
Result<std::vector<std::string>> rad_command(std::string_view line) {
    if (line.find_first_of("|&;<>$`") != std::string_view::npos) {
        return std::vector<std::string>{"/bin/sh", "-c", std::string(line)};
    }
    return split_command(line);
}

Result<void> rad_memory(const std::vector<std::string_view>& lines, const TaskFileContext& ctx,
                        MemoryInfo& memory) {
    struct Slot {
        std::size_t index;
        std::string_view what;
        std::optional<MiB>* target;
    };
    const Slot slots[] = {{kRadOracle, "the oracle MiB", &memory.profiled_mib},
                          {kRadHorus, "the Horus estimate (MiB)", &memory.horus_mib},
                          {kRadFakeTensor, "the FakeTensor estimate (MiB)", &memory.faketensor_mib},
                          {kRadGpuMemNet, "the GPUMemNet estimate (MiB)", &memory.gpumemnet_mib}};
    for (const Slot& s : slots) {
        auto value = rad_number(lines, s.index, s.what, static_cast<double>(kMaxMemoryMib),
                                "16 TiB (16777216 MiB) per GPU", ctx);
        if (!value) {
            return tl::unexpected(value.error());
        }
        *s.target = *value;
    }
    return {};
}

// 1-based line text for warnings: "gpt2_xl.rad:13: ...".
std::string at_line(const TaskFileContext& ctx, std::size_t zero_based) {
    return fmt::format("{}:{}", ctx.source, zero_based + 1);
}

// What the reader does not read, said rather than dropped: lines past the format's twelve (a
// second block pasted after the first, whose figures would otherwise be lost without a word)
// and memory figures the file does not give.
std::vector<std::string> rad_warnings(const std::vector<std::string_view>& lines,
                                      const MemoryInfo& memory, const TaskFileContext& ctx) {
    std::vector<std::string> out;
    std::optional<std::size_t> first_extra;
    std::optional<std::size_t> extra_command;
    for (std::size_t i = kRadLines; i < lines.size(); ++i) {
        if (trim(lines[i]).empty()) {
            continue;
        }
        first_extra = first_extra.value_or(i);
        if (!extra_command && lines[i].find("python") != std::string_view::npos) {
            extra_command = i;
        }
    }
    if (extra_command) {
        out.push_back(fmt::format("{}: a second block (its command on line {}) after the 12 "
                                  "lines of a .rad file is not read; put each task in its own "
                                  ".rad file",
                                  at_line(ctx, *first_extra), *extra_command + 1));
    } else if (first_extra) {
        out.push_back(fmt::format("{}: lines after the 12 of a .rad file are not read",
                                  at_line(ctx, *first_extra)));
    }
    const bool none = !memory.profiled_mib && !memory.horus_mib && !memory.faketensor_mib &&
                      !memory.gpumemnet_mib;
    if (none) {
        out.push_back(fmt::format("{}: no memory figures (lines 9-12: oracle, Horus, FakeTensor, "
                                  "GPUMemNet); CARMA plans the task from its history, or declare "
                                  "its need with --mem",
                                  ctx.source));
    }
    return out;
}

}  // namespace

Result<SubmitRequest> parse_rad_task(std::string_view text, const TaskFileContext& ctx) {
    const std::vector<std::string_view> lines = split_lines(text);
    std::size_t at = kRadFirstCommandLine;
    while (at < lines.size() && lines[at].find("python") == std::string_view::npos) {
        ++at;
    }
    if (at >= lines.size()) {
        return error_at(ctx, -1,
                        "no command: a .rad file has its `python ...` command line from line 3 on");
    }
    SubmitRequest r;
    auto command = rad_command(trim(lines[at]));
    if (!command) {
        return error_at(ctx, static_cast<int>(at), command.error().message);
    }
    r.command = std::move(*command);
    auto gpus = rad_number(lines, kRadGpus, "the GPU count", kMaxGpusPerTask,
                           fmt::format("{}", kMaxGpusPerTask), ctx);
    if (!gpus) {
        return tl::unexpected(gpus.error());
    }
    if (!*gpus || **gpus < 1) {
        return error_at(ctx, static_cast<int>(kRadGpus),
                        "the GPU count (line 8 of a .rad file) must be a number of at least 1");
    }
    r.gpus = static_cast<int>(**gpus);
    if (auto s = rad_memory(lines, ctx, r.memory); !s) {
        return tl::unexpected(s.error());
    }
    // The original server ignored this line and ran every task in one environment; CARMA
    // activates the one named here.
    if (lines.size() > kRadEnvironment) {
        auto words = split_command(trim(lines[kRadEnvironment]));
        if (words && words->size() == 3 && ((*words)[0] == "conda" || (*words)[0] == "source") &&
            (*words)[1] == "activate") {
            r.conda = (*words)[2];
        }
    }
    r.name = ctx.default_name;
    r.workdir = ctx.default_workdir.lexically_normal().string();
    r.warnings = rad_warnings(lines, r.memory, ctx);
    return r;
}

}  // namespace carma::api
