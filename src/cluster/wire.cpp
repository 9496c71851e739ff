#include "cluster/wire.h"

#include <openssl/evp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <type_traits>

#include <fmt/format.h>

#include "core/json_limits.h"
#include "core/json_number.h"
#include "core/node_name.h"
#include "core/text.h"

namespace carma::cluster {

using nlohmann::json;

namespace {

// Whether `j` nests at most `max_depth` arrays and objects. It recurses at most max_depth
// levels, so it is safe on a value of any depth (a reader given a value parsed without
// parse_wire_json), unlike dump() and copying, which recurse all the way down.
bool depth_within(const json& j, std::size_t max_depth) {
    if (!j.is_structured()) {
        return true;
    }
    if (max_depth == 0) {
        return false;
    }
    for (const json& child : j) {  // an object's values
        if (!depth_within(child, max_depth - 1)) {
            return false;
        }
    }
    return true;
}

template <typename T>
std::string range_text(T lo, T hi) {
    if constexpr (std::is_floating_point_v<T>) {
        if (lo == std::numeric_limits<T>::lowest() && hi == std::numeric_limits<T>::max()) {
            return "a finite number";
        }
        return fmt::format("a number from {} to {}", lo, hi);
    } else {
        return fmt::format("an integer from {} to {}", lo, hi);
    }
}

// Reading with the path of every field in the error: "report.samples[2].smact: expected a number".
// Every number is checked against its type and range (core/json_number.h), every list and text
// against its bound (wire.h), before it is stored.
struct Reader {
    std::string error;

    bool bad(const std::string& path, std::string_view what) {
        if (error.empty()) {
            error = fmt::format("{}: expected {}", path, what);
        }
        return false;
    }
    const json* field(const json& j, const std::string& path, const char* key) {
        if (!j.is_object()) {
            bad(path, "an object");
            return nullptr;
        }
        auto it = j.find(key);
        return it == j.end() ? nullptr : &*it;
    }
    // `v` as a T within [lo, hi], stored in `out`; `where` names it in the error.
    template <typename T>
    bool value(const json& v, const std::string& where, T& out,
               T lo = std::numeric_limits<T>::lowest(), T hi = std::numeric_limits<T>::max()) {
        if (!v.is_number()) {
            return bad(where, "a number");
        }
        const std::optional<T> n = json_number<T>(v);
        if (!n || *n < lo || *n > hi) {
            return bad(where, range_text(lo, hi));
        }
        out = *n;
        return true;
    }
    template <typename T>
    void number(const json& j, const std::string& path, const char* key, T& out,
                T lo = std::numeric_limits<T>::lowest(), T hi = std::numeric_limits<T>::max()) {
        if (const json* v = field(j, path, key)) {
            value(*v, path + "." + key, out, lo, hi);
        }
    }
    template <typename T>
    void optional_number(const json& j, const std::string& path, const char* key,
                         std::optional<T>& out) {
        const json* v = field(j, path, key);
        if (!v || v->is_null()) {
            out.reset();
            return;
        }
        if (!v->is_number()) {
            bad(path + "." + key, "a number or null");
            return;
        }
        T n{};
        if (value(*v, path + "." + key, n)) {
            out = n;
        }
    }
    void text(const json& j, const std::string& path, const char* key, std::string& out,
              std::size_t max_bytes) {
        const json* v = field(j, path, key);
        if (!v) {
            return;
        }
        if (!v->is_string()) {
            bad(path + "." + key, "a string");
            return;
        }
        const auto& s = v->get_ref<const std::string&>();
        if (s.size() > max_bytes) {
            bad(path + "." + key, fmt::format("at most {} bytes (it has {})", max_bytes, s.size()));
            return;
        }
        out = s;
    }
    void flag(const json& j, const std::string& path, const char* key, bool& out) {
        const json* v = field(j, path, key);
        if (!v) {
            return;
        }
        if (!v->is_boolean()) {
            bad(path + "." + key, "true or false");
            return;
        }
        out = v->get<bool>();
    }
    const json* array(const json& j, const std::string& path, const char* key,
                      std::size_t max_items) {
        const json* v = field(j, path, key);
        if (!v) {
            return nullptr;
        }
        if (!v->is_array()) {
            bad(path + "." + key, "an array");
            return nullptr;
        }
        if (v->size() > max_items) {
            bad(path + "." + key,
                fmt::format("at most {} entries (it has {})", max_items, v->size()));
            return nullptr;
        }
        return v;
    }
    // A GPU's index on its node: what the hub numbers its slots by.
    void gpu_index(const json& j, const std::string& path, int& out) {
        int index = 0;
        number(j, path, "index", index);
        if (error.empty() && (index < 0 || index >= kMaxNodeGpus)) {
            bad(path + ".index", fmt::format("a GPU index from 0 to {} (a node has at most {} GPUs)",
                                             kMaxNodeGpus - 1, kMaxNodeGpus));
            return;
        }
        out = index;
    }
    // An attempt's directory name as the server chose it (attempt_name): never a path.
    void attempt(const json& j, const std::string& path, const char* key, std::string& out) {
        text(j, path, key, out, kMaxShortText);
        if (error.empty() && !parse_attempt_name(out)) {
            bad(path + "." + key, "an attempt name <task>-<attempt> such as \"12-1\"");
        }
    }
};

MetricSource source_from(std::string_view s) {
    for (MetricSource m : {MetricSource::Unavailable, MetricSource::Emulated, MetricSource::Dcgm,
                           MetricSource::NvmlGpm, MetricSource::Nvml}) {
        if (to_string(m) == s) {
            return m;
        }
    }
    return MetricSource::Unavailable;
}

template <typename T>
json optional_json(const std::optional<T>& v) {
    return v ? json(*v) : json(nullptr);
}

device::GpuInfo gpu_from(Reader& r, const json& j, const std::string& path) {
    device::GpuInfo g;
    r.gpu_index(j, path, g.index);
    r.text(j, path, "uuid", g.uuid, kMaxShortText);
    r.text(j, path, "name", g.name, kMaxShortText);
    r.number(j, path, "total_mib", g.total_mib, MiB{0});
    r.flag(j, path, "mig", g.mig_enabled);
    return g;
}

device::GpuSample sample_from(Reader& r, const json& j, const std::string& path) {
    device::GpuSample s;
    r.gpu_index(j, path, s.index);
    r.number(j, path, "free_mib", s.free_mib, MiB{0});
    r.number(j, path, "used_mib", s.used_mib, MiB{0});
    r.optional_number(j, path, "util", s.util);
    r.optional_number(j, path, "smact", s.smact);
    r.optional_number(j, path, "smocc", s.smocc);
    r.optional_number(j, path, "drama", s.drama);
    r.optional_number(j, path, "power_w", s.power_w);
    r.optional_number(j, path, "energy_j", s.energy_j);
    r.number(j, path, "age_s", s.age_s);
    r.text(j, path, "error", s.error, kMaxErrorText);
    if (const json* src = r.field(j, path, "sources"); src && !src->is_object()) {
        r.bad(path + ".sources", "an object");
    } else if (src) {
        auto one = [&](const char* key, MetricSource& out) {
            std::string v;
            r.text(*src, path + ".sources", key, v, kMaxShortText);
            out = source_from(v);
        };
        one("memory", s.sources.memory);
        one("util", s.sources.util);
        one("smact", s.sources.smact);
        one("smocc", s.sources.smocc);
        one("drama", s.sources.drama);
        one("power", s.sources.power);
        one("energy", s.sources.energy);
    }
    if (const json* procs = r.array(j, path, "processes", kMaxSampleProcesses)) {
        for (std::size_t i = 0; i < procs->size() && r.error.empty(); ++i) {
            const std::string p = fmt::format("{}.processes[{}]", path, i);
            device::GpuProcess proc;
            // As the backend gave it; 0 is left to the hub to ignore, a negative one is forged.
            r.number((*procs)[i], p, "pid", proc.pid, 0);
            r.number((*procs)[i], p, "used_mib", proc.used_mib, MiB{0});
            r.flag((*procs)[i], p, "mps_server", proc.mps_server);
            r.optional_number((*procs)[i], p, "activity", proc.activity);
            s.processes.push_back(proc);
        }
    }
    return s;
}

// Log bytes are not UTF-8 in general, and JSON strings must be.
std::string base64(std::string_view bytes) {
    std::string out(4 * ((bytes.size() + 2) / 3), '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()),
                                  static_cast<int>(bytes.size()));
    out.resize(static_cast<std::size_t>(std::max(n, 0)));
    return out;
}

std::optional<std::string> unbase64(std::string_view text) {
    if (text.size() % 4 != 0) {
        return std::nullopt;
    }
    std::string out(3 * (text.size() / 4), '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(text.data()),
                                  static_cast<int>(text.size()));
    if (n < 0) {
        return std::nullopt;
    }
    // EVP_DecodeBlock counts the padding as bytes.
    std::size_t len = static_cast<std::size_t>(n);
    for (std::size_t i = text.size(); i > 0 && text[i - 1] == '=' && len > 0; --i) {
        --len;
    }
    out.resize(len);
    return out;
}

}  // namespace

std::string attempt_name(std::int64_t task, int number) {
    return fmt::format("{}-{}", task, number);
}

namespace {

// Decimal digits only (from_chars alone would take a '-'), no leading zero, within T.
template <typename T>
std::optional<T> strict_decimal(std::string_view text) {
    const bool digits =
        std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (text.empty() || !digits || (text.size() > 1 && text.front() == '0')) {
        return std::nullopt;
    }
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

}  // namespace

std::optional<std::pair<std::int64_t, int>> parse_attempt_name(const std::string& name) {
    const auto dash = name.find('-');
    if (dash == std::string::npos) {
        return std::nullopt;
    }
    const std::string_view text = name;
    auto task = strict_decimal<std::int64_t>(text.substr(0, dash));
    auto number = strict_decimal<int>(text.substr(dash + 1));
    if (!task || !number) {
        return std::nullopt;
    }
    return std::pair{*task, *number};
}

std::string attempt_name_of(const std::string& dir) {
    const auto slash = dir.find_last_of('/');
    return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

json to_json(const device::GpuInfo& g) {
    return {{"index", g.index}, {"uuid", g.uuid}, {"name", g.name},
            {"total_mib", g.total_mib}, {"mig", g.mig_enabled}};
}

json to_json(const device::GpuSample& s) {
    json procs = json::array();
    for (const device::GpuProcess& p : s.processes) {
        procs.push_back({{"pid", p.pid}, {"used_mib", p.used_mib}, {"mps_server", p.mps_server},
                         {"activity", optional_json(p.activity)}});
    }
    const MetricSources& m = s.sources;
    return {{"index", s.index},
            {"free_mib", s.free_mib},
            {"used_mib", s.used_mib},
            {"util", optional_json(s.util)},
            {"smact", optional_json(s.smact)},
            {"smocc", optional_json(s.smocc)},
            {"drama", optional_json(s.drama)},
            {"power_w", optional_json(s.power_w)},
            {"energy_j", optional_json(s.energy_j)},
            {"sources",
             {{"memory", to_string(m.memory)}, {"util", to_string(m.util)},
              {"smact", to_string(m.smact)}, {"smocc", to_string(m.smocc)},
              {"drama", to_string(m.drama)}, {"power", to_string(m.power)},
              {"energy", to_string(m.energy)}}},
            {"age_s", s.age_s},
            {"processes", procs},
            {"error", s.error}};
}

json to_json(const AgentReport& r) {
    json gpus = json::array();
    for (const device::GpuInfo& g : r.gpus) {
        gpus.push_back(to_json(g));
    }
    json samples = json::array();
    for (const device::GpuSample& s : r.samples) {
        samples.push_back(to_json(s));
    }
    json attempts = json::array();
    for (const AttemptReport& a : r.attempts) {
        json logs = json::array();
        for (const LogChunk& c : a.logs) {
            logs.push_back({{"stream", c.stderr_stream ? "stderr" : "stdout"},
                            {"offset", c.offset},
                            {"data", base64(c.data)},
                            {"eof", c.eof}});
        }
        const char* state = a.state == AttemptReport::State::Running ? "running"
                            : a.state == AttemptReport::State::Ended ? "ended"
                                                                     : "vanished";
        attempts.push_back({{"name", a.name},
                            {"dir", a.dir},
                            {"shim_pid", a.shim_pid},
                            {"state", state},
                            {"exit", a.exit ? json::parse(exec::exit_to_json(*a.exit))
                                            : json(nullptr)},
                            {"members", a.members},
                            {"stderr_tail", a.stderr_tail},
                            {"logs", logs}});
    }
    json replies = json::array();
    for (const LaunchReply& l : r.replies) {
        replies.push_back({{"id", l.id}, {"ok", l.ok}, {"shim_pid", l.shim_pid}, {"dir", l.dir},
                           {"error", l.error}, {"invalid", l.invalid}});
    }
    return {{"version", r.version},   {"node", r.node},
            {"host", r.host},         {"instance", r.instance},
            {"slurm_job", r.slurm_job}, {"uid", r.uid},
            {"backend", r.backend},   {"gpus", gpus},
            {"samples", samples},     {"scan_error", r.scan_error},
            {"attempts", attempts},   {"absent", r.absent},
            {"replies", replies},     {"ending", r.ending}};
}

json to_json(const std::vector<Command>& commands) {
    json list = json::array();
    for (const Command& c : commands) {
        switch (c.kind) {
            case Command::Kind::Launch:
                list.push_back({{"type", "launch"}, {"id", c.id}, {"name", c.name},
                                {"request", json::parse(c.request_json)}});
                break;
            case Command::Kind::Stop:
                list.push_back({{"type", "stop"}, {"name", c.name}});
                break;
            case Command::Kind::Forget:
                list.push_back({{"type", "forget"}, {"name", c.name}});
                break;
            case Command::Kind::Logs:
                list.push_back({{"type", "logs"},
                                {"name", c.name},
                                {"stdout_offset", c.stdout_offset},
                                {"stderr_offset", c.stderr_offset}});
                break;
            case Command::Kind::Check:
                list.push_back({{"type", "check"}, {"name", c.name}});
                break;
        }
    }
    return {{"version", kWireVersion}, {"commands", list}};
}

Result<nlohmann::json> parse_wire_json(std::string_view text, std::size_t max_bytes) {
    if (text.size() > max_bytes) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the message has {} bytes, more than the {} a message may have",
                                text.size(), max_bytes));
    }
    if (auto at = json_too_deep_at(text, kMaxWireDepth)) {
        return fail(ErrorCode::InvalidArgument,
                    json_too_deep_message("the message", kMaxWireDepth, *at));
    }
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        // e.what() quotes the bytes it stopped at, which may not be UTF-8.
        return fail(ErrorCode::InvalidArgument,
                    "the message is not JSON: " + escaped_bytes(e.what()));
    }
}

Result<AgentReport> report_from_json(const json& j) {
    if (!depth_within(j, kMaxWireDepth)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("malformed agent report: nested deeper than {}", kMaxWireDepth));
    }
    Reader r;
    AgentReport out;
    const std::string path = "report";
    out.version = 0;
    r.number(j, path, "version", out.version);
    if (r.error.empty() && out.version != kWireVersion) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the agent speaks wire version {} and this server {}; run the "
                                "same carma version on the nodes and the server",
                                out.version, kWireVersion));
    }
    r.text(j, path, "node", out.node, kMaxNodeName);
    if (r.error.empty() && !out.node.empty() && !valid_node_name(out.node)) {
        r.bad(path + ".node", fmt::format("a node name of letters, digits, '.', '_' and '-' "
                                          "(at most {})", kMaxNodeName));
    }
    r.text(j, path, "host", out.host, kMaxShortText);
    r.text(j, path, "instance", out.instance, kMaxShortText);
    r.text(j, path, "scan_error", out.scan_error, kMaxErrorText);
    r.text(j, path, "slurm_job", out.slurm_job, kMaxShortText);
    // (uid_t)-1 is no user: what setuid() and chown() take as "unchanged".
    r.number(j, path, "uid", out.uid, uid_t{0}, static_cast<uid_t>(-2));
    r.text(j, path, "backend", out.backend, kMaxShortText);
    r.flag(j, path, "ending", out.ending);
    if (const json* gpus = r.array(j, path, "gpus", kMaxNodeGpus)) {
        for (std::size_t i = 0; i < gpus->size() && r.error.empty(); ++i) {
            out.gpus.push_back(gpu_from(r, (*gpus)[i], fmt::format("{}.gpus[{}]", path, i)));
        }
    }
    if (const json* samples = r.array(j, path, "samples", kMaxSamples)) {
        for (std::size_t i = 0; i < samples->size() && r.error.empty(); ++i) {
            out.samples.push_back(
                sample_from(r, (*samples)[i], fmt::format("{}.samples[{}]", path, i)));
        }
    }
    if (const json* attempts = r.array(j, path, "attempts", kMaxAttempts)) {
        for (std::size_t i = 0; i < attempts->size() && r.error.empty(); ++i) {
            const json& a = (*attempts)[i];
            const std::string p = fmt::format("{}.attempts[{}]", path, i);
            AttemptReport rep;
            r.attempt(a, p, "name", rep.name);
            r.text(a, p, "dir", rep.dir, kMaxPathText);
            // 0: the agent has not read the shim's pid (yet).
            r.number(a, p, "shim_pid", rep.shim_pid, pid_t{0});
            std::string state;
            r.text(a, p, "state", state, kMaxShortText);
            if (state == "ended") {
                rep.state = AttemptReport::State::Ended;
            } else if (state == "vanished") {
                rep.state = AttemptReport::State::Vanished;
            } else if (state != "running") {
                r.bad(p + ".state", "running, ended or vanished");
            }
            if (const json* e = r.field(a, p, "exit"); e && !e->is_null()) {
                // An exit record is one object of plain values (exec::exit_to_json).
                const bool flat = e->is_object() && std::none_of(e->begin(), e->end(), [](const json& v) {
                    return v.is_structured();
                });
                auto exit = flat ? exec::exit_from_json(e->dump())
                                 : Result<exec::ExitRecord>(fail(ErrorCode::InvalidArgument,
                                                                 "not an object of plain values"));
                if (exit) {
                    rep.exit = *exit;
                } else {
                    r.bad(p + ".exit", "an exit record (" + exit.error().message + ")");
                }
                if (rep.exit && rep.exit->error.size() > kMaxErrorText) {
                    r.bad(p + ".exit.error", fmt::format("at most {} bytes", kMaxErrorText));
                }
            }
            if (const json* m = r.array(a, p, "members", kMaxMembers)) {
                for (std::size_t k = 0; k < m->size() && r.error.empty(); ++k) {
                    pid_t pid = 0;
                    if (r.value((*m)[k], fmt::format("{}.members[{}]", p, k), pid, pid_t{1})) {
                        rep.members.insert(pid);
                    }
                }
            }
            r.text(a, p, "stderr_tail", rep.stderr_tail, kMaxStderrTail);
            if (const json* logs = r.array(a, p, "logs", kMaxLogChunks)) {
                for (std::size_t k = 0; k < logs->size() && r.error.empty(); ++k) {
                    const json& c = (*logs)[k];
                    const std::string lp = fmt::format("{}.logs[{}]", p, k);
                    LogChunk chunk;
                    std::string stream;
                    std::string data;
                    r.text(c, lp, "stream", stream, kMaxShortText);
                    r.number(c, lp, "offset", chunk.offset, std::uint64_t{0}, kMaxLogOffset);
                    r.text(c, lp, "data", data, 4 * ((kMaxLogChunkBytes + 2) / 3));
                    r.flag(c, lp, "eof", chunk.eof);
                    if (stream != "stdout" && stream != "stderr") {
                        r.bad(lp + ".stream", "stdout or stderr");
                    }
                    chunk.stderr_stream = stream == "stderr";
                    if (auto bytes = unbase64(data); bytes && bytes->size() <= kMaxLogChunkBytes) {
                        chunk.data = std::move(*bytes);
                    } else {
                        r.bad(lp + ".data",
                              fmt::format("base64 of at most {} bytes", kMaxLogChunkBytes));
                    }
                    rep.logs.push_back(std::move(chunk));
                }
            }
            if (rep.state == AttemptReport::State::Ended && !rep.exit) {
                r.bad(p + ".exit", "the exit record of an ended attempt");
            }
            out.attempts.push_back(std::move(rep));
        }
    }
    if (const json* absent = r.array(j, path, "absent", kMaxAbsent)) {
        for (std::size_t i = 0; i < absent->size() && r.error.empty(); ++i) {
            const std::string p = fmt::format("{}.absent[{}]", path, i);
            const json& name = (*absent)[i];
            if (!name.is_string() || !parse_attempt_name(name.get<std::string>())) {
                r.bad(p, "an attempt name <task>-<attempt> such as \"12-1\"");
                break;
            }
            out.absent.push_back(name.get<std::string>());
        }
    }
    if (const json* replies = r.array(j, path, "replies", kMaxReplies)) {
        for (std::size_t i = 0; i < replies->size() && r.error.empty(); ++i) {
            const json& l = (*replies)[i];
            const std::string p = fmt::format("{}.replies[{}]", path, i);
            LaunchReply rep;
            r.number(l, p, "id", rep.id);
            r.flag(l, p, "ok", rep.ok);
            r.number(l, p, "shim_pid", rep.shim_pid, pid_t{0});
            r.text(l, p, "dir", rep.dir, kMaxPathText);
            r.text(l, p, "error", rep.error, kMaxErrorText);
            r.flag(l, p, "invalid", rep.invalid);
            out.replies.push_back(std::move(rep));
        }
    }
    if (!r.error.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "malformed agent report: " + escaped_bytes(r.error));
    }
    if (out.node.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "malformed agent report: report.node is empty; start the agent with --node "
                    "NAME");
    }
    return out;
}

Result<std::vector<Command>> commands_from_json(const json& j) {
    if (!depth_within(j, kMaxWireDepth)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("malformed answer from the server: nested deeper than {}",
                                kMaxWireDepth));
    }
    Reader r;
    std::vector<Command> out;
    int version = 0;
    r.number(j, "answer", "version", version);
    if (r.error.empty() && version != kWireVersion) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the server speaks wire version {} and this agent {}; run the "
                                "same carma version on the nodes and the server",
                                version, kWireVersion));
    }
    if (const json* list = r.array(j, "answer", "commands", kMaxCommands)) {
        for (std::size_t i = 0; i < list->size() && r.error.empty(); ++i) {
            const json& c = (*list)[i];
            const std::string p = fmt::format("answer.commands[{}]", i);
            Command cmd;
            std::string type;
            r.text(c, p, "type", type, kMaxShortText);
            r.attempt(c, p, "name", cmd.name);
            if (type == "launch") {
                cmd.kind = Command::Kind::Launch;
                r.number(c, p, "id", cmd.id);
                const json* q = r.field(c, p, "request");
                if (!q || !q->is_object()) {
                    r.bad(p + ".request", "the launch request");
                } else if (auto request = exec::request_from_json(q->dump())) {
                    cmd.request = std::move(*request);
                    cmd.request_json = q->dump();
                } else {
                    r.bad(p + ".request", "a launch request (" + request.error().message + ")");
                }
            } else if (type == "stop") {
                cmd.kind = Command::Kind::Stop;
            } else if (type == "forget") {
                cmd.kind = Command::Kind::Forget;
            } else if (type == "logs") {
                cmd.kind = Command::Kind::Logs;
                r.number(c, p, "stdout_offset", cmd.stdout_offset, std::uint64_t{0}, kMaxLogOffset);
                r.number(c, p, "stderr_offset", cmd.stderr_offset, std::uint64_t{0}, kMaxLogOffset);
            } else if (type == "check") {
                cmd.kind = Command::Kind::Check;
            } else {
                r.bad(p + ".type", "launch, stop, forget, logs or check");
            }
            out.push_back(std::move(cmd));
        }
    }
    if (!r.error.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "malformed answer from the server: " + escaped_bytes(r.error));
    }
    return out;
}

}  // namespace carma::cluster
