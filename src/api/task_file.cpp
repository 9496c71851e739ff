#include "api/task_file.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "core/controls.h"
#include "core/text.h"
#include "core/units.h"

namespace carma::api {

namespace fs = std::filesystem;

namespace {

constexpr int kMaxAttemptsLimit = 100;                 // docs/api.md: max_attempts is 1..100
constexpr std::uintmax_t kMaxTaskFileBytes = 1 << 20;  // the API refuses bodies over 1 MiB
constexpr int kMaxGpusPerTask = 1024;                  // the daemon refuses more (task_json.cpp)

// ---- shared helpers -----------------------------------------------------------------------

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
        s.remove_prefix(1);
    }
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
        s.remove_suffix(1);
    }
    return s;
}

// "source:line: what" with a 1-based line; without a line when the position is unknown.
tl::unexpected<Error> error_at(const TaskFileContext& ctx, int zero_based_line,
                               const std::string& what) {
    if (zero_based_line < 0) {
        return fail(ErrorCode::InvalidArgument, fmt::format("{}: {}", ctx.source, what));
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("{}:{}: {}", ctx.source, zero_based_line + 1, what));
}

std::string resolve_dir(const fs::path& base, const std::string& dir) {
    fs::path p(dir);
    if (p.is_relative()) {
        p = base / p;
    }
    return p.lexically_normal().string();
}

std::string lower_extension(const fs::path& path) {
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext;
}

// ---- YAML ---------------------------------------------------------------------------------

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
    auto n = integer(f, 1, std::numeric_limits<int>::max());
    if (!n) {
        return tl::unexpected(n.error());
    }
    r.gpus = *n;
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

// `after: 12` or `after: [12, 13]`.
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
        auto id = integer(one, 1, std::numeric_limits<int>::max());
        if (!id) {
            return tl::unexpected(id.error());
        }
        r.after.push_back(*id);
    }
    return {};
}

Status parse_hold(const Field& f, SubmitRequest& r) {
    auto text = non_empty_scalar(f);
    if (!text) {
        return tl::unexpected(text.error());
    }
    const std::string word = to_lower(trim(*text));
    if (word != "true" && word != "false" && word != "yes" && word != "no") {
        return f.error("must be true or false");
    }
    r.hold = word == "true" || word == "yes";
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

struct FieldParser {
    std::string_view name;
    Status (*parse)(const Field&, SubmitRequest&);
};

// The order here is the order the "known fields" hint lists them in.
constexpr std::array<FieldParser, 16> kFields = {{
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
    {"hold", parse_hold},
    {"array", parse_array},
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

// Counts what one document holds without building it: where the document starts (to tell
// whether the parser moved at all) and where its first node is (the line an error names).
class DocumentProbe : public YAML::EventHandler {
public:
    YAML::Mark start;
    std::optional<YAML::Mark> first_node;

    void OnDocumentStart(const YAML::Mark& mark) override { start = mark; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
    void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark); }
    void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  const std::string&) override {
        node(mark);
    }
    void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
        node(mark);
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
        node(mark);
    }
    void OnMapEnd() override {}

private:
    void node(const YAML::Mark& mark) {
        if (!first_node) {
            first_node = mark;
        }
    }
};

Result<YAML::Node> load_yaml(std::string_view text, const TaskFileContext& ctx) {
    try {
        // Not YAML::LoadAll: yaml-cpp 0.7 (Debian 12) loops forever on a stray ',' outside a
        // flow collection (a file that is just ",", or "- a\n,"), appending an empty document
        // per turn until memory runs out (jbeder/yaml-cpp#1040, fixed upstream by #1319). The
        // documents are walked as events instead; a document that starts where the previous one
        // did means the parser is stuck on a token it cannot use.
        std::istringstream stream{std::string(text)};
        YAML::Parser parser(stream);
        std::vector<DocumentProbe> documents;
        for (DocumentProbe probe; parser.HandleNextDocument(probe); probe = DocumentProbe()) {
            if (!documents.empty() && probe.start.pos == documents.back().start.pos) {
                const auto at = static_cast<std::size_t>(std::max(probe.start.pos, 0));
                const std::string what =
                    at < text.size() ? fmt::format("unexpected '{}'", text[at]) : "unexpected end";
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{}:{}:{}: malformed YAML: {}", ctx.source,
                                        probe.start.line + 1, probe.start.column + 1, what));
            }
            documents.push_back(probe);
        }
        if (documents.size() > 1) {
            // Silently using the first of several tasks would lose the others.
            const YAML::Mark at = documents[1].first_node.value_or(documents[1].start);
            return error_at(ctx, at.line,
                            "a task file holds one task, but a second YAML document starts here; "
                            "submit each task from its own file");
        }
        return documents.empty() ? YAML::Node() : YAML::Load(std::string(text));
    } catch (const YAML::ParserException& e) {
        // yaml-cpp's marks are 0-based; editors count from 1.
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}:{}:{}: malformed YAML: {}", ctx.source, e.mark.line + 1,
                                e.mark.column + 1, e.msg));
    }
}

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

// ---- .rad -----------------------------------------------------------------------------------

// 0-based line numbers of the .rad format (carma-spec.md §1.4).
constexpr std::size_t kRadEnvironment = 1;  // "conda activate tf"
constexpr std::size_t kRadFirstCommandLine = 2;
constexpr std::size_t kRadGpus = 7;
constexpr std::size_t kRadOracle = 8;
constexpr std::size_t kRadHorus = 9;
constexpr std::size_t kRadFakeTensor = 10;
constexpr std::size_t kRadGpuMemNet = 11;

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

Status rad_memory(const std::vector<std::string_view>& lines, const TaskFileContext& ctx,
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

}  // namespace

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
    if (!r.after.empty()) {
        body["after"] = r.after;
    }
    if (r.hold) {
        body["hold"] = true;
    }
    if (!r.array.empty()) {
        body["array"] = r.array;
    }
    return body;
}

Result<SubmitRequest> parse_yaml_task(std::string_view text, const TaskFileContext& ctx) {
    auto root = load_yaml(text, ctx);
    if (!root) {
        return tl::unexpected(root.error());
    }
    if (!root->IsDefined() || root->IsNull()) {
        return error_at(ctx, -1, "the task file is empty; it needs at least `command:`");
    }
    if (!root->IsMap()) {
        return error_at(ctx, root->Mark().line,
                        "a task file is a mapping of fields (name, command, gpus, ...), not a "
                        "list or a single value");
    }
    SubmitRequest r;
    try {
        if (auto s = parse_fields(*root, ctx, r); !s) {
            return tl::unexpected(s.error());
        }
    } catch (const YAML::Exception& e) {
        // yaml-cpp signals some malformed input lazily, while nodes are walked.
        return error_at(ctx, e.mark.line, fmt::format("malformed YAML: {}", e.msg));
    }
    if (r.command.empty()) {
        return error_at(ctx, -1, "no command; add e.g. `command: python train.py`");
    }
    if (r.name.empty()) {
        r.name = ctx.default_name;
    }
    if (r.workdir.empty()) {
        r.workdir = ctx.default_workdir.lexically_normal().string();
    }
    return r;
}

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
    return r;
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
