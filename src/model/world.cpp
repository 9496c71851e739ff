#include "model/world.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/csv.h"
#include "data/embedded.h"
#include "model/constants.h"
#include "model/world_compose.h"

namespace carma::model {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// A standard normal drawn from a key (Box-Muller on two hashed uniforms).
double normal_of(std::uint64_t key) {
    const std::uint64_t a = mix(key);
    const std::uint64_t b = mix(a ^ 0x5bd1e995ULL);
    const double u1 = (static_cast<double>(a >> 11) + 0.5) / 9007199254740992.0;
    const double u2 = static_cast<double>(b >> 11) / 9007199254740992.0;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
}

Result<double> number(const CsvTable& t, std::size_t row, const char* col, std::string_view src) {
    const int c = t.column(col);
    if (c < 0) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("{}: missing column '{}'", src, col));
    }
    return csv_number(t, row, c, src);
}

}  // namespace

std::string_view to_string(WorldKind kind) {
    return kind == WorldKind::Model ? "model" : "measured";
}

Result<WorldKind> parse_world_kind(std::string_view text) {
    if (text == "model") {
        return WorldKind::Model;
    }
    if (text == "measured") {
        return WorldKind::Measured;
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("world '{}' is unknown; use model (the device model) or measured "
                            "(measured pair speeds)",
                            text));
}

std::string_view to_string(WorldCompose compose) {
    switch (compose) {
        case WorldCompose::Model:
            return "model";
        case WorldCompose::Pairwise:
            return "pairwise";
        case WorldCompose::Bottleneck:
            return "bottleneck";
    }
    return "model";
}

Result<WorldCompose> parse_world_compose(std::string_view text) {
    for (WorldCompose c :
         {WorldCompose::Model, WorldCompose::Pairwise, WorldCompose::Bottleneck}) {
        if (text == to_string(c)) {
            return c;
        }
    }
    return fail(ErrorCode::InvalidArgument,
                fmt::format("world compose '{}' is unknown; use model (the device model), pairwise "
                            "(the product of pair speeds) or bottleneck (the most contended "
                            "resource sets the pace)",
                            text));
}

Result<WorldConfig> checked(WorldConfig config) {
    if (!(config.bias >= 0 && config.bias <= 10)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("world bias {} is out of range; use 0 (none) to 10", config.bias));
    }
    if (!(config.noise >= 0 && config.noise <= 0.5)) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("world noise {} is out of range; use 0 (none) to 0.5 (the relative "
                                "sd of memory peaks)",
                                config.noise));
    }
    return config;
}

std::string describe(const WorldConfig& config) {
    std::string out(to_string(config.kind));
    if (config.compose != WorldCompose::Model) {
        out += fmt::format("+compose {}", to_string(config.compose));
    }
    if (config.bias > 0) {
        out += fmt::format("+bias {:g}", config.bias);
    }
    if (config.noise > 0) {
        out += fmt::format("+noise {:g}", config.noise);
    }
    return out;
}

Result<MeasuredPairs> MeasuredPairs::parse(std::string_view pairs_csv, std::string_view bins_csv) {
    MeasuredPairs m;
    const std::string_view psrc = "calibration/lucid_pairs_with_solo_metrics.csv";
    auto pairs = parse_csv(pairs_csv, psrc);
    if (!pairs) {
        return tl::unexpected(pairs.error());
    }
    for (std::size_t r = 0; r < pairs->rows.size(); ++r) {
        auto u1 = number(*pairs, r, "solo_gpu_util1_pct", psrc);
        auto u2 = number(*pairs, r, "solo_gpu_util2_pct", psrc);
        auto s1 = number(*pairs, r, "norm_speed1", psrc);
        auto s2 = number(*pairs, r, "norm_speed2", psrc);
        for (const auto* v : {&u1, &u2, &s1, &s2}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        m.points.push_back(Point{*u1 / 100.0, *u2 / 100.0, *s1});
        m.points.push_back(Point{*u2 / 100.0, *u1 / 100.0, *s2});
    }
    const std::string_view bsrc = "calibration/lucid_pair_speed_by_summed_util.csv";
    auto bins = parse_csv(bins_csv, bsrc);
    if (!bins) {
        return tl::unexpected(bins.error());
    }
    for (std::size_t r = 0; r < bins->rows.size(); ++r) {
        auto lo = number(*bins, r, "summed_solo_gpu_util_lo", bsrc);
        auto hi = number(*bins, r, "summed_solo_gpu_util_hi", bsrc);
        auto mean = number(*bins, r, "mean_norm_speed", bsrc);
        auto sd = number(*bins, r, "sd_norm_speed", bsrc);
        for (const auto* v : {&lo, &hi, &mean, &sd}) {
            if (!*v) {
                return tl::unexpected(v->error());
            }
        }
        m.bins.push_back(Bin{*lo, *hi, *mean, *sd});
    }
    if (m.points.empty() || m.bins.empty()) {
        return fail(ErrorCode::InvalidArgument,
                    "measured pair data is empty; the world 'measured' needs the Lucid pairs and "
                    "bins of data/calibration");
    }
    return m;
}

const MeasuredPairs& MeasuredPairs::embedded() {
    static const MeasuredPairs pairs = [] {
        auto p = data::embedded("calibration/lucid-pairs");
        auto b = data::embedded("calibration/lucid-bins");
        if (!p || !b) {
            throw std::logic_error("the measured pair data was not embedded at build time");
        }
        auto parsed = MeasuredPairs::parse(*p, *b);
        if (!parsed) {
            throw std::logic_error(parsed.error().message);
        }
        return std::move(*parsed);
    }();
    return pairs;
}

std::optional<double> MeasuredPairs::nearest(double u_self, double u_other, double radius) const {
    double best = radius * radius;
    std::optional<double> out;
    for (const Point& p : points) {
        const double d = (p.u_self - u_self) * (p.u_self - u_self) +
                         (p.u_other - u_other) * (p.u_other - u_other);
        if (d < best) {
            best = d;
            out = p.speed;
        }
    }
    return out;
}

const MeasuredPairs::Bin& MeasuredPairs::bin(double summed_u) const {
    for (const Bin& b : bins) {
        if (summed_u >= b.lo && summed_u < b.hi) {
            return b;
        }
    }
    return summed_u < bins.front().lo ? bins.front() : bins.back();
}

double MeasuredPairs::spread(double summed_u) const { return bin(summed_u).sd; }

std::uint64_t world_id(std::string_view name) {
    std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
    for (char c : name) {
        h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    }
    return h;
}

World::World(WorldConfig config, SharingMode mode, const MeasuredPairs* measured)
    : config_(config), params_(slowdown_params(mode)), measured_(measured) {
    const bool needs_pairs =
        config_.kind == WorldKind::Measured || config_.compose == WorldCompose::Pairwise;
    if (needs_pairs && !measured_) {
        measured_ = &MeasuredPairs::embedded();
    }
}

std::optional<double> World::measured_pair(const WorldTask& self, const WorldTask& other) const {
    const std::uint64_t key = mix(self.id) ^ other.id;
    auto it = pair_cache_.find(key);
    if (it == pair_cache_.end()) {
        it = pair_cache_.emplace(key, measured_->nearest(self.util, other.util, kPairRadius)).first;
    }
    if (!it->second) {
        return std::nullopt;
    }
    return std::clamp(*it->second, 0.05, 1.0);
}

double World::measured_speed(std::size_t i, std::span<const WorldTask> tasks,
                             double model) const {
    if (tasks.size() == 2) {
        if (auto s = measured_pair(tasks[i], tasks[1 - i])) {
            return *s;
        }
    }
    // Unknown: the device model, off by a per-set draw at the measured spread. The key is
    // symmetric in the co-runners (their order on the GPU does not matter).
    double summed = 0;
    std::uint64_t others = 0;
    for (std::size_t j = 0; j < tasks.size(); ++j) {
        summed += tasks[j].util;
        if (j != i) {
            others += mix(tasks[j].id);
        }
    }
    const double z = std::clamp(normal_of(mix(config_.seed) ^ mix(tasks[i].id + others)), -2.5, 2.5);
    return std::clamp(model + measured_->spread(summed) * z, 0.05, 1.0);
}

double World::pair_speed(const WorldTask& self, const WorldTask& other) const {
    if (auto s = measured_pair(self, other)) {
        return *s;
    }
    // Unmeasured: a draw from the measured pairs of its summed utilisation. Lucid's norm_speed is
    // co-located / solo throughput, already a speed (1 = alone), so the bin's mean and sd are
    // used as they are; speeds above 1 are measurement noise and clip. Keyed by (self, other) in
    // order: each side of a pair has its own draw, as the Lucid sides' deviations are
    // uncorrelated; a salt keeps it apart from the compose-model draw.
    const MeasuredPairs::Bin& b = measured_->bin(self.util + other.util);
    const std::uint64_t key = mix(mix(mix(config_.seed ^ 0x70616972ULL) ^ self.id) ^ other.id);
    const double z = std::clamp(normal_of(key), -2.5, 2.5);
    return std::clamp(b.mean + b.sd * z, 0.05, 1.0);
}

double World::pairwise_speed(std::size_t i, std::span<const WorldTask> tasks) const {
    double speed = 1.0;
    for (std::size_t j = 0; j < tasks.size(); ++j) {
        if (j != i) {
            speed *= pair_speed(tasks[i], tasks[j]);
        }
    }
    return std::clamp(speed, 0.05, 1.0);
}

void World::collocated_speeds(std::span<const WorldTask> tasks, std::span<double> out) const {
    const std::size_t n = tasks.size();
    switch (config_.compose) {
        case WorldCompose::Model: {
            double summed = 0;
            for (const WorldTask& t : tasks) {
                summed += t.util;
            }
            for (std::size_t i = 0; i < n; ++i) {
                const double s = task_speed(tasks[i].util, summed, params_);
                out[i] = config_.kind == WorldKind::Measured ? measured_speed(i, tasks, s) : s;
            }
            return;
        }
        case WorldCompose::Pairwise:
            // The measured pairs are part of the product, for either kind.
            for (std::size_t i = 0; i < n; ++i) {
                out[i] = pairwise_speed(i, tasks);
            }
            return;
        case WorldCompose::Bottleneck:
            bottleneck_speeds(tasks, out);
            if (config_.kind == WorldKind::Measured && n == 2) {
                for (std::size_t i = 0; i < n; ++i) {
                    out[i] = measured_pair(tasks[i], tasks[1 - i]).value_or(out[i]);
                }
            }
            return;
    }
}

void World::uncapped_speeds(std::span<const WorldTask> tasks, std::span<double> out) const {
    const std::size_t n = tasks.size();
    if (n == 1) {
        out[0] = 1;
    }
    if (n < 2) {
        return;
    }
    collocated_speeds(tasks, out);
    for (std::size_t i = 0; i < n; ++i) {
        out[i] /= 1.0 + config_.bias;
    }
}

// The fraction of its solo pace a capped task keeps: an MPS client limited to a share of the
// SMs issues work that fast at most (NVIDIA's MPS guide, "Volta MPS execution resource
// provisioning").
namespace {
double cap_factor(const WorldTask& t) {
    return t.sm_cap < 1 && t.util > t.sm_cap ? std::max(t.sm_cap, 0.0) / t.util : 1.0;
}
}  // namespace

void World::speeds(std::span<const WorldTask> tasks, std::span<double> out) const {
    const std::size_t n = std::min(tasks.size(), out.size());
    const bool capped = std::any_of(tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(n),
                                    [](const WorldTask& t) { return cap_factor(t) < 1; });
    if (!capped) {
        uncapped_speeds(tasks.first(n), out.first(n));
        return;
    }
    std::vector<WorldTask> seen(tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(n));
    for (WorldTask& t : seen) {
        const double f = cap_factor(t);
        t.util *= f;
        t.smact *= f;
        t.smocc *= f;
        t.drama *= f;
    }
    uncapped_speeds(seen, out.first(n));
    for (std::size_t i = 0; i < n; ++i) {
        out[i] = std::max(out[i] * cap_factor(tasks[i]), 0.0);
    }
}

MiB World::peak_mib(MiB profile_peak_mib, std::uint64_t task, int attempt, MiB cap_mib) const {
    if (config_.noise <= 0) {
        return profile_peak_mib;
    }
    const std::uint64_t key =
        mix(mix(config_.seed ^ 0x6d656d6f7279ULL) ^ task) ^ static_cast<std::uint64_t>(attempt);
    const double z = std::clamp(normal_of(key), -2.5, 2.5);
    const auto peak = static_cast<MiB>(
        std::llround(static_cast<double>(profile_peak_mib) * (1.0 + config_.noise * z)));
    return std::clamp<MiB>(peak, std::min(profile_peak_mib, kContextMiB),
                           std::max(profile_peak_mib, cap_mib));
}

}  // namespace carma::model
