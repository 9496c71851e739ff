#include "core/dependency.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "core/text.h"

namespace carma {

namespace {

constexpr std::array<std::pair<DependencyType, std::string_view>, 4> kDependencyTypes = {{
    {DependencyType::AfterOk, "afterok"},
    {DependencyType::AfterAny, "afterany"},
    {DependencyType::AfterNotOk, "afternotok"},
    {DependencyType::Singleton, "singleton"},
}};

tl::unexpected<Error> bad_spec(std::string_view text, std::string_view why) {
    return fail(ErrorCode::InvalidArgument,
                fmt::format("--dependency '{}' {}; write TYPE:ID[:ID...] or singleton joined "
                            "by ',', with TYPE afterok, afterany or afternotok and ID a task "
                            "(12), an array member (12_3) or a whole array (12 or 12_*)",
                            text, why));
}

// Slurm's types CARMA does not take, with why.
std::string unsupported_type(std::string_view type) {
    if (type == "after") {
        return "'after' (once the dependency started) is not supported; afterany waits until "
               "it ended";
    }
    return fmt::format("has the type '{}', which CARMA does not know", type);
}

}  // namespace

std::string_view to_string(DependencyType type) {
    for (const auto& [t, name] : kDependencyTypes) {
        if (t == type) {
            return name;
        }
    }
    return "afterok";
}

std::optional<DependencyType> parse_dependency_type(std::string_view word) {
    for (const auto& [t, name] : kDependencyTypes) {
        if (name == word) {
            return t;
        }
    }
    return std::nullopt;
}

Result<std::vector<Dependency>> parse_dependency_spec(std::string_view text) {
    const std::string_view s = trim(text);
    if (s.empty()) {
        return bad_spec(text, "is empty");
    }
    if (s.find('?') != std::string_view::npos) {
        return bad_spec(text, "uses '?' (any one of them), which CARMA does not support: every "
                              "dependency must hold");
    }
    std::vector<Dependency> out;
    for (const std::string& clause : split_list(s, ',')) {
        const std::vector<std::string> words = split_list(trim(clause), ':');
        const std::string type_word = to_lower(trim(words.front()));
        const auto type = parse_dependency_type(type_word);
        if (!type) {
            return bad_spec(text, unsupported_type(type_word));
        }
        if (*type == DependencyType::Singleton) {
            if (words.size() > 1) {
                return bad_spec(text, "has singleton with a task id; singleton takes none (it "
                                      "waits for the earlier tasks of your name)");
            }
            out.push_back({*type, TaskRef{}});
            continue;
        }
        if (words.size() < 2) {
            return bad_spec(text, fmt::format("has '{}' without a task id", clause));
        }
        for (std::size_t i = 1; i < words.size(); ++i) {
            const std::string_view word = trim(words[i]);
            if (word.find('+') != std::string_view::npos) {
                return bad_spec(text, "has a delay (+MINUTES), which CARMA does not support");
            }
            auto ref = parse_task_ref(word);
            if (!ref) {
                return bad_spec(text, ref.error().message);
            }
            out.push_back({*type, *ref});
        }
    }
    return out;
}

Result<std::vector<Dependency>> parse_after_list(std::string_view text) {
    // sbatch writes afterok:12:13; commas are accepted too.
    const char sep = text.find(':') != std::string_view::npos ? ':' : ',';
    std::vector<Dependency> out;
    for (const std::string& word : split_list(text, sep)) {
        if (trim(word).empty()) {
            continue;
        }
        auto ref = parse_task_ref(trim(word));
        if (!ref) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("--after {}: {}", text, ref.error().message));
        }
        out.push_back({DependencyType::AfterOk, *ref});
    }
    if (out.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("--after '{}' names no task; write --after 12:13", text));
    }
    return out;
}

std::string format_dependency(const Dependency& d) {
    if (d.type == DependencyType::Singleton) {
        return std::string(to_string(d.type));
    }
    return fmt::format("{}:{}", to_string(d.type), format_task_ref(d.on));
}

DependencyJudgement judge_dependency(DependencyType type, std::span<const TargetEnd> targets) {
    const auto first = [&](TargetEnd e) -> std::optional<std::size_t> {
        const auto it = std::find(targets.begin(), targets.end(), e);
        return it == targets.end() ? std::nullopt
                                   : std::optional<std::size_t>(it - targets.begin());
    };
    const bool all_ended = !first(TargetEnd::NotYet);
    const std::optional<std::size_t> unsuccessful = first(TargetEnd::Unsuccessful);
    switch (type) {
        case DependencyType::AfterOk:
            if (unsuccessful) {
                return {DependencyVerdict::Never, unsuccessful};
            }
            return {all_ended ? DependencyVerdict::Satisfied : DependencyVerdict::Waiting, {}};
        case DependencyType::AfterAny:
        case DependencyType::Singleton:  // resolved at submit; as afterany if ever judged
            return {all_ended ? DependencyVerdict::Satisfied : DependencyVerdict::Waiting, {}};
        case DependencyType::AfterNotOk:
            if (!all_ended) {
                return {DependencyVerdict::Waiting, {}};
            }
            return {unsuccessful ? DependencyVerdict::Satisfied : DependencyVerdict::Never, {}};
    }
    return {};
}

std::string describe_waiting(std::span<const Dependency> dependencies) {
    std::vector<std::string> clauses;
    for (const auto& [type, name] : kDependencyTypes) {
        if (type == DependencyType::Singleton) {
            continue;  // resolved at submit into afterany on the tasks it waits for
        }
        std::vector<std::string> labels;
        for (const Dependency& d : dependencies) {
            if (d.type == type) {
                labels.push_back(format_task_ref(d.on));
            }
        }
        if (labels.empty()) {
            continue;
        }
        const char* what = type == DependencyType::AfterOk    ? "succeed"
                           : type == DependencyType::AfterAny ? "end"
                                                              : "end without succeeding";
        clauses.push_back(fmt::format("{}{} to {}", clauses.empty() ? "task(s) " : "",
                                      fmt::join(labels, ", "), what));
    }
    return fmt::format("waits for {}", fmt::join(clauses, "; "));
}

}  // namespace carma
