// The fields of a YAML task file (api/task_file.h): one parser per field, each checking its
// value's kind and range and naming the field and line of what is wrong, and the table that
// finds them (and suggests the closest name for an unknown one).

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "api/task_file_internal.h"
#include "core/controls.h"
#include "core/dependency.h"
#include "core/gpu_share.h"
#include "core/host.h"
#include "core/mail.h"
#include "core/output_pattern.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::api {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxAttemptsLimit = 100;  // docs/api.md: max_attempts is 1..100

std::string resolve_dir(const fs::path& base, const std::string& dir) {
    fs::path p(dir);
    if (p.is_relative()) {
        p = base / p;
    }
    return p.lexically_normal().string();
}

// One `key: value` of the file while it is being read.
struct Field {
    std::string key;
    const YAML::Node& value;
    const TaskFileContext& ctx;

    int line() const { return value.Mark().line; }
    tl::unexpected<Error> error(const std::string& what) const {
        return error_at(ctx, line(), fmt::format("{}: {}", key, what));
    }
};

using Status = Result<void>;

Result<std::string> scalar(const Field& f, const YAML::Node& node) {
    if (node.IsNull()) {
        return f.error("has no value; give one or remove the field");
    }
    if (!node.IsScalar()) {
        return f.error(node.IsSequence() ? "must be a single value, not a list"
                                         : "must be a single value, not a mapping");
    }
    return node.Scalar();
}

Result<std::string> non_empty_scalar(const Field& f) {
    auto text = scalar(f, f.value);
    if (text && trim(*text).empty()) {
        return f.error("must not be empty");
    }
    return text;
}

// An integer written as one (2, not 2.0 or "two"), within [low, high].
Result<int> integer(const Field& f, int low, int high) {
    auto text = scalar(f, f.value);
    if (!text) {
        return tl::unexpected(text.error());
    }
    const std::string_view digits = trim(*text);
    long long value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    const bool whole = ec == std::errc() && ptr == digits.data() + digits.size() && !digits.empty();
    if (!whole || value < low || value > high) {
        const std::string range = high == std::numeric_limits<int>::max()
                                      ? fmt::format("of at least {}", low)
                                      : fmt::format("from {} to {}", low, high);
        return f.error(fmt::format("must be an integer {} (got '{}')", range, *text));
    }
    return static_cast<int>(value);
}

Result<MiB> memory_value(const Field& f, const YAML::Node& node) {
    auto text = scalar(f, node);
    if (!text) {
        return tl::unexpected(text.error());
    }
    auto mib = parse_memory(*text);
    if (!mib) {
        return error_at(f.ctx, node.Mark().line, fmt::format("{}: {}", f.key, mib.error().message));
    }
    return *mib;
}

Status set_memory(const Field& f, std::optional<MiB>& slot) {
    auto mib = memory_value(f, f.value);
    if (!mib) {
        return tl::unexpected(mib.error());
    }
    slot = *mib;
    return {};
}

Status parse_name(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    r.name = std::string(trim(*text));
    return {};
}

Status parse_command(const Field& f, SubmitRequest& r) {
    if (f.value.IsSequence()) {
        for (const YAML::Node& item : f.value) {
            auto arg = scalar(f, item);
            if (!arg) {
                return tl::unexpected(arg.error());
            }
            r.command.push_back(*arg);
        }
    } else {
        auto line = scalar(f, f.value);
        if (!line) {
            return tl::unexpected(line.error());
        }
        auto argv = split_command(*line);
        if (!argv) {
            return f.error(argv.error().message);
        }
        r.command = std::move(*argv);
    }
    if (r.command.empty()) {
        return f.error("is empty; write e.g. `command: python train.py` or a list");
    }
    return {};
}

Status parse_gpus(const Field& f, SubmitRequest& r) {
    auto n = integer(f, 0, std::numeric_limits<int>::max());  // 0: a CPU-only task
    if (!n) {
        return tl::unexpected(n.error());
    }
    r.gpus = *n;
    return {};
}

Status parse_cpus(const Field& f, SubmitRequest& r) {
    auto n = integer(f, 1, kMaxCpusPerTask);
    if (!n) {
        return tl::unexpected(n.error());
    }
    r.cpus = *n;
    return {};
}

Status parse_host_memory(const Field& f, SubmitRequest& r) {
    std::optional<MiB> mib;
    if (auto s = set_memory(f, mib); !s) {
        return s;
    }
    r.host_mem_mib = mib;
    return {};
}

Status parse_memory_field(const Field& f, SubmitRequest& r) {
    return set_memory(f, r.memory.declared_mib);
}

Status parse_profiled_memory(const Field& f, SubmitRequest& r) {
    return set_memory(f, r.memory.profiled_mib);
}

Status parse_estimates(const Field& f, SubmitRequest& r) {
    if (!f.value.IsMap()) {
        return f.error(
            "must be a mapping like {horus: 28923, faketensor: 10666, gpumemnet: 24000}");
    }
    for (const auto& entry : f.value) {
        const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
        const Field inner{"estimates." + key, entry.second, f.ctx};
        std::optional<MiB>* slot = key == "horus"        ? &r.memory.horus_mib
                                   : key == "faketensor" ? &r.memory.faketensor_mib
                                   : key == "gpumemnet"  ? &r.memory.gpumemnet_mib
                                                         : nullptr;
        if (slot == nullptr) {
            return error_at(f.ctx, entry.first.Mark().line,
                            fmt::format("unknown estimate '{}'; known estimates: horus, "
                                        "faketensor, gpumemnet",
                                        key));
        }
        if (auto s = set_memory(inner, *slot); !s) {
            return s;
        }
    }
    return {};
}

Status parse_workdir(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    r.workdir = resolve_dir(f.ctx.base_dir, *text);
    return {};
}

Status parse_env(const Field& f, SubmitRequest& r) {
    if (!f.value.IsMap()) {
        return f.error("must be a mapping of variable names to values, e.g. {EPOCHS: \"3\"}");
    }
    for (const auto& entry : f.value) {
        const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : std::string();
        if (name.empty() || name.find('=') != std::string::npos) {
            return error_at(f.ctx, entry.first.Mark().line,
                            fmt::format("env: '{}' is not a variable name", name));
        }
        const Field inner{"env." + name, entry.second, f.ctx};
        if (entry.second.IsNull()) {
            return inner.error("has no value; write \"\" for an empty one");
        }
        auto value = scalar(inner, entry.second);
        if (!value) {
            return tl::unexpected(value.error());
        }
        r.env[name] = *value;
    }
    return {};
}

Status parse_max_attempts(const Field& f, SubmitRequest& r) {
    auto n = integer(f, 1, kMaxAttemptsLimit);
    if (!n) {
        return tl::unexpected(n.error());
    }
    r.max_attempts = *n;
    return {};
}

Status parse_workload(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    r.workload = std::string(trim(*text));
    return {};
}

Status parse_conda(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    r.conda = std::string(trim(*text));  // a name, or a path: resolved by `carma submit`
    return {};
}

Status parse_venv(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    // Relative to the task file, like workdir.
    r.venv = (f.ctx.base_dir / std::string(trim(*text))).lexically_normal().string();
    return {};
}

Status parse_time_limit_field(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    auto seconds = parse_time_limit(*text);
    if (!seconds) {
        return f.error(seconds.error().message);
    }
    r.time_limit_s = *seconds;
    return {};
}

// `after: 12` or `after: [12, 13_2, "14_*"]`: afterok on each.
Status parse_after(const Field& f, SubmitRequest& r) {
    std::vector<YAML::Node> items;
    if (f.value.IsSequence()) {
        for (std::size_t i = 0; i < f.value.size(); ++i) {
            items.push_back(f.value[i]);
        }
    } else {
        items.push_back(f.value);
    }
    for (const YAML::Node& item : items) {
        const Field one{f.key, item, f.ctx};
        auto text = scalar(one, item);
        if (!text) {
            return tl::unexpected(text.error());
        }
        auto ref = parse_task_ref(trim(*text));
        if (!ref) {
            return one.error(ref.error().message);
        }
        r.dependencies.push_back({DependencyType::AfterOk, *ref});
    }
    return {};
}

// `dependency: afterany:12:13,afternotok:14`, as sbatch's --dependency.
Status parse_dependency(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    auto deps = parse_dependency_spec(*text);
    if (!deps) {
        return f.error(deps.error().message);
    }
    r.dependencies.insert(r.dependencies.end(), deps->begin(), deps->end());
    return {};
}

// `output: train-%j.out` and `error:`, as sbatch's --output/--error.
Status parse_output_field(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    if (auto ok = check_output_pattern(*text, "the file name"); !ok) {
        return f.error(ok.error().message);
    }
    (f.key == "output" ? r.output : r.error) = *text;
    return {};
}

// `hold: true`, `exclusive: true` and `requeue: true`.
Status parse_flag_field(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    const std::string word = to_lower(trim(*text));
    if (word != "true" && word != "false" && word != "yes" && word != "no") {
        return f.error("must be true or false");
    }
    (f.key == "hold"      ? r.hold
     : f.key == "requeue" ? r.requeue
                          : r.exclusive) = word == "true" || word == "yes";
    return {};
}

// `max_slowdown: 1.3`: at most 30 % slower than alone.
Status parse_max_slowdown(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    auto bound = parse_max_slowdown_value(*text);
    if (!bound) {
        return f.error(bound.error().message);
    }
    r.max_slowdown = *bound;
    return {};
}

// `gpu_share: 0.5`: half of one GPU.
Status parse_gpu_share_field(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    auto milli = parse_gpu_share(*text);
    if (!milli) {
        return f.error(milli.error().message);
    }
    r.gpu_share_milli = *milli;
    return {};
}

// `nice: 100`, as sbatch's --nice.
Status parse_nice_field(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    auto nice = parse_nice_value(*text);
    if (!nice) {
        return f.error(nice.error().message);
    }
    r.nice = *nice;
    return {};
}

Status parse_array(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    if (auto ok = parse_array_indices(*text); !ok) {
        return f.error(ok.error().message);
    }
    r.array = std::string(trim(*text));
    return {};
}

// `mail_type: END,FAIL` and `mail_user: alice@lab`, as sbatch's --mail-type/--mail-user.
Status parse_mail_field(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    if (f.key == "mail_type") {
        if (auto ok = parse_mail_types(*text); !ok) {
            return f.error(ok.error().message);
        }
        r.mail_type = std::string(trim(*text));
    } else if (!plausible_mail_address(trim(*text))) {
        return f.error("must be a user name or an address user@host");
    } else {
        r.mail_user = std::string(trim(*text));
    }
    return {};
}

struct FieldParser {
    std::string_view name;
    Status (*parse)(const Field&, SubmitRequest&);
};

// The order here is the order the "known fields" hint lists them in.
constexpr std::array<FieldParser, 28> kFields = {{
    {"name", parse_name},
    {"command", parse_command},
    {"gpus", parse_gpus},
    {"memory", parse_memory_field},
    {"profiled_memory", parse_profiled_memory},
    {"estimates", parse_estimates},
    {"workdir", parse_workdir},
    {"env", parse_env},
    {"max_attempts", parse_max_attempts},
    {"workload", parse_workload},
    {"conda", parse_conda},
    {"venv", parse_venv},
    {"time_limit", parse_time_limit_field},
    {"after", parse_after},
    {"dependency", parse_dependency},
    {"hold", parse_flag_field},
    {"array", parse_array},
    {"output", parse_output_field},
    {"error", parse_output_field},
    {"mail_type", parse_mail_field},
    {"mail_user", parse_mail_field},
    {"exclusive", parse_flag_field},
    {"max_slowdown", parse_max_slowdown},
    {"gpu_share", parse_gpu_share_field},
    {"nice", parse_nice_field},
    {"requeue", parse_flag_field},
    {"cpus_per_task", parse_cpus},
    {"host_memory", parse_host_memory},
}};

std::string unknown_field_message(std::string_view key) {
    std::vector<std::string_view> names;
    std::string_view closest;
    std::size_t best = 3;  // suggest only near misses (at most two edits)
    for (const FieldParser& f : kFields) {
        names.push_back(f.name);
        const std::size_t d = edit_distance(key, f.name);
        if (d < best) {
            best = d;
            closest = f.name;
        }
    }
    std::string hint = closest.empty() ? "" : fmt::format(" (did you mean '{}'?)", closest);
    return fmt::format("unknown field '{}'{}; known fields: {}", key, hint, fmt::join(names, ", "));
}

}  // namespace

Status parse_fields(const YAML::Node& root, const TaskFileContext& ctx, SubmitRequest& r) {
    std::set<std::string, std::less<>> seen;
    for (const auto& entry : root) {
        const int line = entry.first.Mark().line;
        if (!entry.first.IsScalar()) {
            return error_at(ctx, line, "field names must be plain words like 'command'");
        }
        const std::string key = entry.first.Scalar();
        const auto* parser = std::find_if(kFields.begin(), kFields.end(),
                                          [&](const FieldParser& f) { return f.name == key; });
        if (parser == kFields.end()) {
            return error_at(ctx, line, unknown_field_message(key));
        }
        if (!seen.insert(key).second) {
            return error_at(ctx, line, fmt::format("field '{}' appears twice", key));
        }
        if (auto s = parser->parse(Field{key, entry.second, ctx}, r); !s) {
            return s;
        }
    }
    return {};
}

}  // namespace carma::api
