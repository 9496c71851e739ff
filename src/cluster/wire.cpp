#include "cluster/wire.h"

#include <fmt/format.h>

namespace carma::cluster {

using nlohmann::json;

namespace {

// Reading with the path of every field in the error: "report.samples[2].smact: expected a number".
struct Reader {
    std::string error;

    bool bad(const std::string& path, const char* what) {
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
    template <typename T>
    void number(const json& j, const std::string& path, const char* key, T& out) {
        const json* v = field(j, path, key);
        if (!v) {
            return;
        }
        if (!v->is_number()) {
            bad(path + "." + key, "a number");
            return;
        }
        out = v->get<T>();
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
        out = v->get<T>();
    }
    void text(const json& j, const std::string& path, const char* key, std::string& out) {
        const json* v = field(j, path, key);
        if (!v) {
            return;
        }
        if (!v->is_string()) {
            bad(path + "." + key, "a string");
            return;
        }
        out = v->get<std::string>();
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
    const json* array(const json& j, const std::string& path, const char* key) {
        const json* v = field(j, path, key);
        if (!v) {
            return nullptr;
        }
        if (!v->is_array()) {
            bad(path + "." + key, "an array");
            return nullptr;
        }
        return v;
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
    r.number(j, path, "index", g.index);
    r.text(j, path, "uuid", g.uuid);
    r.text(j, path, "name", g.name);
    r.number(j, path, "total_mib", g.total_mib);
    r.flag(j, path, "mig", g.mig_enabled);
    return g;
}

device::GpuSample sample_from(Reader& r, const json& j, const std::string& path) {
    device::GpuSample s;
    r.number(j, path, "index", s.index);
    r.number(j, path, "free_mib", s.free_mib);
    r.number(j, path, "used_mib", s.used_mib);
    r.optional_number(j, path, "util", s.util);
    r.optional_number(j, path, "smact", s.smact);
    r.optional_number(j, path, "smocc", s.smocc);
    r.optional_number(j, path, "drama", s.drama);
    r.optional_number(j, path, "power_w", s.power_w);
    r.optional_number(j, path, "energy_j", s.energy_j);
    r.number(j, path, "age_s", s.age_s);
    r.text(j, path, "error", s.error);
    if (const json* src = r.field(j, path, "sources"); src && src->is_object()) {
        auto one = [&](const char* key, MetricSource& out) {
            std::string v;
            r.text(*src, path + ".sources", key, v);
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
    if (const json* procs = r.array(j, path, "processes")) {
        for (std::size_t i = 0; i < procs->size(); ++i) {
            const std::string p = fmt::format("{}.processes[{}]", path, i);
            device::GpuProcess proc;
            r.number((*procs)[i], p, "pid", proc.pid);
            r.number((*procs)[i], p, "used_mib", proc.used_mib);
            r.flag((*procs)[i], p, "mps_server", proc.mps_server);
            r.optional_number((*procs)[i], p, "activity", proc.activity);
            s.processes.push_back(proc);
        }
    }
    return s;
}

}  // namespace

std::string attempt_name(std::int64_t task, int number) {
    return fmt::format("{}-{}", task, number);
}

std::optional<std::pair<std::int64_t, int>> parse_attempt_name(const std::string& name) {
    const auto dash = name.find('-');
    if (dash == std::string::npos) {
        return std::nullopt;
    }
    try {
        return std::pair{std::stoll(name.substr(0, dash)), std::stoi(name.substr(dash + 1))};
    } catch (const std::exception&) {
        return std::nullopt;
    }
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
                            {"stderr_tail", a.stderr_tail}});
    }
    json replies = json::array();
    for (const LaunchReply& l : r.replies) {
        replies.push_back({{"id", l.id}, {"ok", l.ok}, {"shim_pid", l.shim_pid}, {"dir", l.dir},
                           {"error", l.error}, {"invalid", l.invalid}});
    }
    return {{"version", r.version}, {"node", r.node},       {"slurm_job", r.slurm_job},
            {"uid", r.uid},         {"backend", r.backend}, {"gpus", gpus},
            {"samples", samples},   {"attempts", attempts}, {"replies", replies},
            {"ending", r.ending}};
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
        }
    }
    return {{"version", kWireVersion}, {"commands", list}};
}

Result<AgentReport> report_from_json(const json& j) {
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
    r.text(j, path, "node", out.node);
    r.text(j, path, "slurm_job", out.slurm_job);
    r.number(j, path, "uid", out.uid);
    r.text(j, path, "backend", out.backend);
    r.flag(j, path, "ending", out.ending);
    if (const json* gpus = r.array(j, path, "gpus")) {
        for (std::size_t i = 0; i < gpus->size(); ++i) {
            out.gpus.push_back(gpu_from(r, (*gpus)[i], fmt::format("{}.gpus[{}]", path, i)));
        }
    }
    if (const json* samples = r.array(j, path, "samples")) {
        for (std::size_t i = 0; i < samples->size(); ++i) {
            out.samples.push_back(
                sample_from(r, (*samples)[i], fmt::format("{}.samples[{}]", path, i)));
        }
    }
    if (const json* attempts = r.array(j, path, "attempts")) {
        for (std::size_t i = 0; i < attempts->size(); ++i) {
            const json& a = (*attempts)[i];
            const std::string p = fmt::format("{}.attempts[{}]", path, i);
            AttemptReport rep;
            r.text(a, p, "name", rep.name);
            r.text(a, p, "dir", rep.dir);
            r.number(a, p, "shim_pid", rep.shim_pid);
            std::string state;
            r.text(a, p, "state", state);
            if (state == "ended") {
                rep.state = AttemptReport::State::Ended;
            } else if (state == "vanished") {
                rep.state = AttemptReport::State::Vanished;
            } else if (state != "running") {
                r.bad(p + ".state", "running, ended or vanished");
            }
            if (const json* e = r.field(a, p, "exit"); e && !e->is_null()) {
                if (auto exit = exec::exit_from_json(e->dump())) {
                    rep.exit = *exit;
                } else {
                    r.bad(p + ".exit", "an exit record");
                }
            }
            if (const json* m = r.array(a, p, "members")) {
                for (const json& pid : *m) {
                    if (!pid.is_number_integer()) {
                        r.bad(p + ".members", "process ids");
                        break;
                    }
                    rep.members.insert(pid.get<pid_t>());
                }
            }
            r.text(a, p, "stderr_tail", rep.stderr_tail);
            if (rep.state == AttemptReport::State::Ended && !rep.exit) {
                r.bad(p + ".exit", "the exit record of an ended attempt");
            }
            out.attempts.push_back(std::move(rep));
        }
    }
    if (const json* replies = r.array(j, path, "replies")) {
        for (std::size_t i = 0; i < replies->size(); ++i) {
            const json& l = (*replies)[i];
            const std::string p = fmt::format("{}.replies[{}]", path, i);
            LaunchReply rep;
            r.number(l, p, "id", rep.id);
            r.flag(l, p, "ok", rep.ok);
            r.number(l, p, "shim_pid", rep.shim_pid);
            r.text(l, p, "dir", rep.dir);
            r.text(l, p, "error", rep.error);
            r.flag(l, p, "invalid", rep.invalid);
            out.replies.push_back(std::move(rep));
        }
    }
    if (!r.error.empty()) {
        return fail(ErrorCode::InvalidArgument, "malformed agent report: " + r.error);
    }
    if (out.node.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "malformed agent report: report.node is empty; start the agent with --node "
                    "NAME");
    }
    return out;
}

Result<std::vector<Command>> commands_from_json(const json& j) {
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
    if (const json* list = r.array(j, "answer", "commands")) {
        for (std::size_t i = 0; i < list->size(); ++i) {
            const json& c = (*list)[i];
            const std::string p = fmt::format("answer.commands[{}]", i);
            Command cmd;
            std::string type;
            r.text(c, p, "type", type);
            r.text(c, p, "name", cmd.name);
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
                    r.bad(p + ".request", "a launch request");
                    if (r.error.find(request.error().message) == std::string::npos) {
                        r.error += " (" + request.error().message + ")";
                    }
                }
            } else if (type == "stop") {
                cmd.kind = Command::Kind::Stop;
            } else if (type == "forget") {
                cmd.kind = Command::Kind::Forget;
            } else {
                r.bad(p + ".type", "launch, stop or forget");
            }
            if (cmd.name.empty() || cmd.name.find('/') != std::string::npos ||
                cmd.name.starts_with(".")) {
                r.bad(p + ".name", "an attempt directory name (no '/')");
            }
            out.push_back(std::move(cmd));
        }
    }
    if (!r.error.empty()) {
        return fail(ErrorCode::InvalidArgument, "malformed answer from the server: " + r.error);
    }
    return out;
}

}  // namespace carma::cluster
