#include "sim/openb.h"

#include <cmath>
#include <initializer_list>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/csv.h"
#include "core/node_name.h"
#include "core/text.h"

namespace carma::sim {

namespace {

// Bounds far beyond any node made, and far from overflow.
constexpr double kMaxCpuMilli = 1e8;      // 100,000 cores
constexpr double kMaxMemMib = 1e9;        // about 1 EiB
constexpr double kMaxOpenbTime = 1e11;    // seconds: about 3,000 years

std::string header_line(std::string_view text) {
    const std::size_t end = text.find('\n');
    std::string line(text.substr(0, end));
    if (!line.empty() && line.back() == '\r') {
        line.pop_back();
    }
    return line;
}

bool header_has(std::string_view text, std::initializer_list<std::string_view> columns) {
    const std::vector<std::string> header = split_list(header_line(text), ',');
    for (std::string_view c : columns) {
        bool found = false;
        for (const std::string& h : header) {
            found = found || trim(h) == c;
        }
        if (!found) {
            return false;
        }
    }
    return true;
}

// A whole number in [lo, hi], with the column and line named when it is not.
Result<std::int64_t> whole(const CsvTable& t, std::size_t row, int col, std::string_view source,
                           double lo, double hi, std::string_view hint) {
    auto v = csv_number(t, row, col, source);
    if (!v) {
        return tl::unexpected(v.error());
    }
    if (*v != std::floor(*v) || *v < lo || *v > hi) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{} line {}: column '{}' is {}; {}", source, t.line_numbers[row],
                                t.header[static_cast<std::size_t>(col)],
                                t.rows[row][static_cast<std::size_t>(col)], hint));
    }
    return static_cast<std::int64_t>(*v);
}

Result<std::vector<int>> columns(const CsvTable& t, std::string_view source,
                                 std::initializer_list<std::string_view> names) {
    std::vector<int> out;
    for (std::string_view n : names) {
        const int c = t.column(n);
        if (c < 0) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{}: no column '{}' (header was: {})", source, n,
                                    fmt::join(t.header, ",")));
        }
        out.push_back(c);
    }
    return out;
}

const std::initializer_list<std::string_view> kNodeColumns = {"sn", "cpu_milli", "memory_mib",
                                                              "gpu", "model"};
const std::initializer_list<std::string_view> kPodColumns = {"name", "cpu_milli", "memory_mib",
                                                             "num_gpu", "gpu_milli"};

struct OpenbTable {
    CsvTable table;
    std::vector<int> cols;  // the required columns, in the order asked
};

// The CSV parsed, once its header is known to be the kind asked (`what`: "node list").
Result<OpenbTable> open_table(std::string_view csv_text, std::string_view name,
                              std::string_view what,
                              std::initializer_list<std::string_view> required) {
    if (!header_has(csv_text, required)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}: not an openb {}; its header must name {} (it was: {})", name,
                                what, fmt::join(required, ", "), header_line(csv_text)));
    }
    auto table = parse_csv(csv_text, name);
    if (!table) {
        return tl::unexpected(table.error());
    }
    auto cols = columns(*table, name, required);
    if (!cols) {
        return tl::unexpected(cols.error());
    }
    return OpenbTable{std::move(*table), std::move(*cols)};
}

}  // namespace

bool is_openb_node_list(std::string_view csv_text) {
    return header_has(csv_text, kNodeColumns);
}

bool is_openb_pod_list(std::string_view csv_text) {
    return header_has(csv_text, kPodColumns);
}

Result<ClusterSpec> parse_openb_nodes(std::string_view csv_text, std::string_view name) {
    auto opened = open_table(csv_text, name, "node list", kNodeColumns);
    if (!opened) {
        return tl::unexpected(opened.error());
    }
    const CsvTable* table = &opened->table;
    const std::vector<int>* cols = &opened->cols;
    ClusterSpec cluster;
    cluster.name = std::string(name);
    for (std::size_t r = 0; r < table->rows.size(); ++r) {
        const auto& row = table->rows[r];
        const int line = table->line_numbers[r];
        NodeSpec node;
        node.name = std::string(trim(row[static_cast<std::size_t>((*cols)[0])]));
        if (!valid_node_name(node.name)) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: node name '{}' is not valid; {}", name, line,
                                    node.name, "use 1 to 255 of A-Z a-z 0-9 . _ -, not . or .."));
        }
        auto cpu = whole(*table, r, (*cols)[1], name, 1, kMaxCpuMilli,
                         "give the node's CPU in thousandths of a core, e.g. 96000");
        auto mem = whole(*table, r, (*cols)[2], name, 0, kMaxMemMib,
                         "give the node's memory in MiB, e.g. 786432");
        auto gpus = whole(*table, r, (*cols)[3], name, 0, kMaxPackGpusPerNode,
                          fmt::format("give a whole number of GPUs from 0 to {}",
                                      kMaxPackGpusPerNode));
        for (const auto* v : {&cpu, &mem, &gpus}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        node.cpu_milli = *cpu;
        node.mem_mib = *mem;
        node.gpus = static_cast<int>(*gpus);
        node.gpu_model = std::string(trim(row[static_cast<std::size_t>((*cols)[4])]));
        if (node.gpus > 0 && node.gpu_model.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: node {} has {} GPUs but no model; name it "
                                    "(e.g. V100M32)",
                                    name, line, node.name, node.gpus));
        }
        if (node.gpus == 0) {
            node.gpu_model.clear();
        }
        cluster.nodes.push_back(std::move(node));
    }
    if (cluster.nodes.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}: the node list has no nodes", name));
    }
    return cluster;
}

Result<PodList> parse_openb_pods(std::string_view csv_text, std::string_view name) {
    auto opened = open_table(csv_text, name, "pod list", kPodColumns);
    if (!opened) {
        return tl::unexpected(opened.error());
    }
    const CsvTable* table = &opened->table;
    const std::vector<int>* cols = &opened->cols;
    const int c_spec = table->column("gpu_spec");
    const int c_qos = table->column("qos");
    const int c_phase = table->column("pod_phase");
    const int c_created = table->column("creation_time");
    const int c_deleted = table->column("deletion_time");
    const int c_scheduled = table->column("scheduled_time");
    PodList list;
    list.name = std::string(name);
    for (std::size_t r = 0; r < table->rows.size(); ++r) {
        const auto& row = table->rows[r];
        const int line = table->line_numbers[r];
        auto field = [&](int c) {
            return c < 0 ? std::string() : std::string(trim(row[static_cast<std::size_t>(c)]));
        };
        Pod pod;
        pod.task.name = field((*cols)[0]);
        if (pod.task.name.empty()) {
            return fail(ErrorCode::InvalidArgument,
                        fmt::format("{} line {}: the pod has no name", name, line));
        }
        auto cpu = whole(*table, r, (*cols)[1], name, 0, kMaxCpuMilli,
                         "give the CPU in thousandths of a core, e.g. 8000");
        auto mem = whole(*table, r, (*cols)[2], name, 0, kMaxMemMib,
                         "give the memory in MiB, e.g. 16384");
        auto gpus = whole(*table, r, (*cols)[3], name, 0, kMaxPackGpusPerNode,
                          fmt::format("give a whole number of GPUs from 0 to {}",
                                      kMaxPackGpusPerNode));
        for (const auto* v : {&cpu, &mem, &gpus}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        pod.task.cpu_milli = static_cast<int>(*cpu);
        pod.task.host_mem_mib = *mem;
        pod.task.gpus = static_cast<int>(*gpus);
        if (pod.task.gpus > 0) {
            auto milli = whole(*table, r, (*cols)[4], name, 1, kMilliPerGpu,
                               "give the thousandths of each GPU, from 1 to 1000 (1000: whole)");
            if (!milli) {
                return tl::unexpected(milli.error());
            }
            if (*milli < kMilliPerGpu && pod.task.gpus > 1) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{} line {}: pod {} asks for {} GPUs at gpu_milli {}; a "
                                        "share is of one GPU, so use num_gpu 1 or gpu_milli 1000",
                                        name, line, pod.task.name, pod.task.gpus, *milli));
            }
            pod.task.gpu_milli = *milli < kMilliPerGpu ? static_cast<int>(*milli) : 0;
            for (const std::string& m : split_list(field(c_spec), '|')) {
                if (!trim(m).empty()) {
                    pod.task.gpu_models.emplace_back(trim(m));
                }
            }
        }
        pod.qos = field(c_qos);
        pod.phase = field(c_phase);
        if (c_created >= 0 && !field(c_created).empty()) {
            PodTimes times;
            auto created = whole(*table, r, c_created, name, 0, kMaxOpenbTime,
                                 "give seconds since the trace's start");
            if (!created) {
                return tl::unexpected(created.error());
            }
            times.created_s = static_cast<double>(*created);
            for (auto [col, slot] : {std::pair{c_scheduled, &times.scheduled_s},
                                     std::pair{c_deleted, &times.deleted_s}}) {
                if (col < 0 || field(col).empty()) {
                    continue;
                }
                auto t = whole(*table, r, col, name, 0, kMaxOpenbTime,
                               "give seconds since the trace's start, or leave it empty");
                if (!t) {
                    return tl::unexpected(t.error());
                }
                *slot = static_cast<double>(*t);
            }
            if (times.deleted_s && *times.deleted_s < times.created_s) {
                return fail(ErrorCode::InvalidArgument,
                            fmt::format("{} line {}: pod {} is deleted ({:.0f} s) before it is "
                                        "created ({:.0f} s)",
                                        name, line, pod.task.name, *times.deleted_s,
                                        times.created_s));
            }
            pod.times = times;
        }
        list.pods.push_back(std::move(pod));
    }
    if (list.pods.empty()) {
        return fail(ErrorCode::InvalidArgument, fmt::format("{}: the pod list has no pods", name));
    }
    return list;
}

Result<std::string> read_text_file(const std::string& path, std::string_view what) {
    std::ifstream in(path);
    if (!in) {
        return fail(ErrorCode::NotFound,
                    fmt::format("{} '{}' cannot be read; check the path", what, path));
    }
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
}

}  // namespace carma::sim
