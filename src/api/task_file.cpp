// Task files (api/task_file.h): which format a file name is, reading one (size-capped) and
// parsing it by its extension, the command-line splitter both formats use, and the request body
// a parsed task becomes.

#include "api/task_file.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <system_error>

#include <fmt/format.h>

#include "api/task_file_internal.h"

namespace carma::api {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxTaskFileBytes = 1 << 20;  // the API refuses bodies over 1 MiB

std::string lower_extension(const fs::path& path) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext;
}

}  // namespace

tl::unexpected<Error> error_at(const TaskFileContext& ctx, int zero_based_line,
                               const std::string& what) {
    if (zero_based_line < 0) {
        return fail(ErrorCode::InvalidArgument, fmt::format("{}: {}", ctx.source, what));
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("{}:{}: {}", ctx.source, zero_based_line + 1, what));
}

Result<std::vector<std::string>> split_command(std::string_view line) {
    enum class Quote { None, Single, Double };
    std::vector<std::string> args;
    std::string word;
    bool in_word = false;  // distinguishes '' (an empty argument) from nothing at all
    Quote quote = Quote::None;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const char c = line[i];
        const bool has_next = i + 1 < line.size();
        if (quote == Quote::Single) {
            quote = c == '\'' ? Quote::None : quote;
            word += c == '\'' ? std::string() : std::string(1, c);
        } else if (quote == Quote::Double) {
            if (c == '"') {
                quote = Quote::None;
            } else if (c == '\\' && has_next && (line[i + 1] == '"' || line[i + 1] == '\\')) {
                word += line[++i];
            } else {
                word += c;
            }
        } else if (std::isspace(static_cast<unsigned char>(c))) {
            if (in_word) {
                args.push_back(std::move(word));
                word.clear();
            }
            in_word = false;
        } else {
            in_word = true;
            if (c == '\'') {
                quote = Quote::Single;
            } else if (c == '"') {
                quote = Quote::Double;
            } else if (c == '\\' && has_next) {
                word += line[++i];
            } else {
                word += c;
            }
        }
    }
    if (quote != Quote::None) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("command '{}' has an unclosed {} quote; close it or write the "
                                "command as a list",
                                line, quote == Quote::Single ? "single" : "double"));
    }
    if (in_word) {
        args.push_back(std::move(word));
    }
    return args;
}

nlohmann::json request_body(const SubmitRequest& r) {
    nlohmann::json body = {{"command", r.command}, {"workdir", r.workdir}};
    if (!r.name.empty()) {
        body["name"] = r.name;
    }
    if (r.gpus) {
        body["gpus"] = *r.gpus;
    }
    if (r.cpus) {
        body["cpus"] = *r.cpus;
    }
    if (r.host_mem_mib) {
        body["host_mem_mib"] = *r.host_mem_mib;
    }
    nlohmann::json memory = nlohmann::json::object();
    const std::pair<const char*, const std::optional<MiB>*> slots[] = {
        {"declared_mib", &r.memory.declared_mib},
        {"profiled_mib", &r.memory.profiled_mib},
        {"horus_mib", &r.memory.horus_mib},
        {"faketensor_mib", &r.memory.faketensor_mib},
        {"gpumemnet_mib", &r.memory.gpumemnet_mib}};
    for (const auto& [key, value] : slots) {
        if (value->has_value()) {
            memory[key] = **value;
        }
    }
    if (!memory.empty()) {
        body["memory"] = std::move(memory);
    }
    if (!r.env.empty()) {
        body["env"] = r.env;
    }
    if (r.explicit_env) {
        body["explicit_env"] = *r.explicit_env;
    }
    if (r.max_attempts) {
        body["max_attempts"] = *r.max_attempts;
    }
    if (!r.conda.empty()) {
        body["conda"] = r.conda;
    }
    if (!r.venv.empty()) {
        body["venv"] = r.venv;
    }
    if (!r.workload.empty()) {
        body["workload"] = r.workload;
    }
    if (r.time_limit_s) {
        body["time_limit_s"] = *r.time_limit_s;
    }
    for (const Dependency& d : r.dependencies) {
        nlohmann::json dependency = {{"type", std::string(to_string(d.type))}};
        if (d.type != DependencyType::Singleton) {  // it names no task
            dependency["task"] = format_task_ref(d.on);
        }
        body["dependencies"].push_back(std::move(dependency));
    }
    if (r.hold) {
        body["hold"] = true;
    }
    if (r.exclusive) {
        body["exclusive"] = true;
    }
    if (r.max_slowdown) {
        body["max_slowdown"] = *r.max_slowdown;
    }
    if (r.gpu_share_milli) {
        body["gpu_share"] = *r.gpu_share_milli / 1000.0;
    }
    if (r.nice) {
        body["nice"] = *r.nice;
    }
    if (r.requeue) {
        body["requeue"] = true;
    }
    if (!r.script.empty()) {
        body["script"] = {{"text", r.script}, {"arg", r.script_arg}};
    }
    if (!r.array.empty()) {
        body["array"] = r.array;
    }
    if (!r.output.empty()) {
        body["output"] = r.output;
    }
    if (!r.error.empty()) {
        body["error"] = r.error;
    }
    if (!r.mail_type.empty()) {
        body["mail_type"] = r.mail_type;
    }
    if (!r.mail_user.empty()) {
        body["mail_user"] = r.mail_user;
    }
    if (!r.warnings.empty()) {
        body["warnings"] = r.warnings;
    }
    return body;
}

bool is_task_file_name(std::string_view arg) {
    const std::string ext = lower_extension(fs::path(arg));
    return ext == ".yaml" || ext == ".yml" || ext == ".rad";
}

Result<SubmitRequest> load_task_file(const fs::path& path, const fs::path& cwd) {
    const fs::path absolute = (path.is_absolute() ? path : cwd / path).lexically_normal();
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(absolute, ec);
    if (ec) {
        return fail(ErrorCode::Io,
                    fmt::format("cannot read task file {}: {}", path.string(), ec.message()));
    }
    if (size > kMaxTaskFileBytes) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("task file {} is {} bytes; a task file is at most 1 MiB",
                                path.string(), size));
    }
    std::ifstream in(absolute, std::ios::binary);
    if (!in) {
        return fail(ErrorCode::Io, fmt::format("cannot open task file {}", path.string()));
    }
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const TaskFileContext ctx{path.string(), path.stem().string(), absolute.parent_path(), cwd};
    return lower_extension(path) == ".rad" ? parse_rad_task(text, ctx) : parse_yaml_task(text, ctx);
}

}  // namespace carma::api
