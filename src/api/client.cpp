#include "api/client.h"

#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

#include <fmt/format.h>

#include "api/unix_http.h"
#include "core/text.h"

namespace carma::api {

namespace {

constexpr std::string_view kRootSocket = "/var/lib/carma/carma.sock";
constexpr std::size_t kBodyExcerpt = 200;  // how much of an unexpected answer an error quotes

bool is_set(const char* value) {
    return value != nullptr && value[0] != '\0';
}

// 0 when a connection to the socket `path` (short enough for sun_path) succeeds, else errno.
int connect_errno(const std::string& path) {
    sockaddr_un addr{};
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return errno;
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    const int err = rc == 0 ? 0 : errno;
    ::close(fd);
    return err;
}

bool fits_sun_path(const std::string& path) {
    return path.size() < sizeof(sockaddr_un{}.sun_path);
}

bool is_socket(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// Why the socket cannot be reached, from the path itself, so the user learns whether the daemon
// is absent, stopped, or not theirs to talk to.
std::string connect_failure_reason(const std::string& path) {
    if (!fits_sun_path(path)) {
        return fmt::format("the path is longer than the {} bytes a Unix socket path may have",
                           sizeof(sockaddr_un{}.sun_path) - 1);
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return errno_text(errno);
    }
    if (!S_ISSOCK(st.st_mode)) {
        return "that path is not a socket";
    }
    const int err = connect_errno(path);
    if (err == 0) {
        return "the connection failed";  // it works now: the daemon was probably starting
    }
    if (err == ECONNREFUSED) {
        return "connection refused (a socket left behind by a daemon that has stopped?)";
    }
    if (err == EACCES) {
        return "permission denied (the socket belongs to another user; ask them or use your own "
               "daemon)";
    }
    return errno_text(err);
}

std::string unreachable_message(const std::string& path, const std::string& reason) {
    return fmt::format(
        "cannot reach the CARMA daemon at {}: {}; is `carma serve` running? (set --socket or "
        "CARMA_SOCKET)",
        path, reason);
}

ErrorCode code_for_status(int status) {
    switch (status) {
        case 404:
            return ErrorCode::NotFound;
        case 422:
            return ErrorCode::Infeasible;
        case 400:
        case 403:
        case 409:
        case 413:
            return ErrorCode::InvalidArgument;
        default:
            return ErrorCode::Internal;
    }
}

std::string excerpt(std::string_view body) {
    if (body.size() <= kBodyExcerpt) {
        return std::string(body);
    }
    return std::string(body.substr(0, kBodyExcerpt)) + "...";
}

// A non-2xx answer: the daemon's own "error" message when it sent one (docs/api.md promises it
// names the object and what to do), else enough of the answer to debug a mismatched daemon.
Error http_error(const ApiClient::Reply& reply, std::string_view method,
                 const std::string& target) {
    const nlohmann::json doc = nlohmann::json::parse(reply.body, nullptr, false);
    if (doc.is_object() && doc.contains("error") && doc["error"].is_string()) {
        return Error{code_for_status(reply.status), doc["error"].get<std::string>()};
    }
    return Error{code_for_status(reply.status),
                 fmt::format("the CARMA daemon answered HTTP {} to {} {} without an error message: "
                             "'{}'",
                             reply.status, method, target, excerpt(reply.body))};
}

std::uint64_t parse_size(std::string_view text, std::uint64_t fallback) {
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
        return fallback;
    }
    return value;
}

std::string_view stream_name(LogStream stream) {
    return stream == LogStream::Stderr ? "stderr" : "stdout";
}

// Appends "?k=v" or "&k=v"; values here are numbers and fixed words, so nothing needs escaping.
void add_query(std::string& target, std::string_view key, std::string_view value) {
    target += target.find('?') == std::string::npos ? '?' : '&';
    target += key;
    target += '=';
    target += value;
}

// RFC 3986 percent-encoding of a query value (user names may hold anything).
std::string query_escape(std::string_view value) {
    std::string out;
    for (char c : value) {
        const auto u = static_cast<unsigned char>(c);
        if (std::isalnum(u) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
            out += c;
        } else {
            out += fmt::format("%{:02X}", u);
        }
    }
    return out;
}

}  // namespace

std::string default_socket_path_for(bool is_root, const char* xdg_state_home, const char* home) {
    if (is_root) {
        return std::string(kRootSocket);
    }
    // The XDG spec says a relative XDG_STATE_HOME is invalid and must be ignored.
    if (is_set(xdg_state_home) && xdg_state_home[0] == '/') {
        return std::string(xdg_state_home) + "/carma/carma.sock";
    }
    const std::string base = is_set(home) ? std::string(home) : std::string("/tmp");
    return base + "/.local/state/carma/carma.sock";
}

std::string default_socket_path() {
    const char* home = std::getenv("HOME");
    if (!is_set(home)) {
        // Services started without a login environment (cron, systemd --user) may lack HOME.
        const passwd* pw = ::getpwuid(::geteuid());
        home = pw != nullptr ? pw->pw_dir : nullptr;
    }
    return default_socket_path_for(::geteuid() == 0, std::getenv("XDG_STATE_HOME"), home);
}

std::string_view system_socket_path() {
    return kRootSocket;
}

std::string client_socket_path_for(bool is_root, const std::string& own, bool own_answers,
                                   bool system_exists) {
    if (is_root) {
        return std::string(kRootSocket);
    }
    return own_answers || !system_exists ? own : std::string(kRootSocket);
}

std::string resolve_socket_path(std::string_view flag) {
    if (!flag.empty()) {
        return std::string(flag);
    }
    const char* env = std::getenv("CARMA_SOCKET");
    if (is_set(env)) {
        return env;
    }
    const bool is_root = ::geteuid() == 0;
    const std::string own = default_socket_path();
    if (is_root) {
        return own;
    }
    // Probing costs a failed connect() for the users of the system daemon; a per-user socket
    // that exists but answers nobody (a daemon that stopped) must not hide the system one.
    const bool own_answers = fits_sun_path(own) && is_socket(own) && connect_errno(own) == 0;
    return client_socket_path_for(false, own, own_answers,
                                  !own_answers && is_socket(std::string(kRootSocket)));
}

std::string socket_option_help() {
    if (::geteuid() == 0) {
        return fmt::format("The daemon's socket (default: $CARMA_SOCKET, else {})", kRootSocket);
    }
    return fmt::format(
        "The daemon's socket (default: $CARMA_SOCKET, else your own daemon's {} while it runs, "
        "else the system daemon's {})",
        default_socket_path(), kRootSocket);
}

bool is_final_state(std::string_view state) {
    static constexpr std::array<std::string_view, 6> kFinal = {"succeeded", "failed", "cancelled",
                                                               "lost", "rejected", "timeout"};
    for (std::string_view s : kFinal) {
        if (state == s) {
            return true;
        }
    }
    return false;
}

ApiClient::ApiClient(std::string socket_path) : socket_path_(std::move(socket_path)) {}

Result<ApiClient::Reply> ApiClient::exchange(std::string_view method, const std::string& target,
                                             const std::string* body) const {
    if (method != "GET" && method != "POST" && method != "DELETE") {
        return fail(ErrorCode::Internal, fmt::format("ApiClient: unsupported method {}", method));
    }
    auto res = unix_http_exchange(socket_path_, method, target, body);
    if (!res) {
        if (res.error().failure == HttpFailure::Connect) {
            return fail(ErrorCode::Io,
                        unreachable_message(socket_path_, connect_failure_reason(socket_path_)));
        }
        return fail(ErrorCode::Io,
                    fmt::format("lost the connection to the CARMA daemon at {} during {} {} ({}); "
                                "see the daemon's log",
                                socket_path_, method, target, res.error().message));
    }
    Reply reply;
    reply.status = res->status;
    reply.body = std::move(res->body);
    reply.log_size = res->header("x-carma-log-size");
    reply.task_state = res->header("x-carma-task-state");
    return reply;
}

Result<ApiClient::Reply> ApiClient::exchange_ok(std::string_view method, const std::string& target,
                                                const std::string* body) const {
    auto reply = exchange(method, target, body);
    if (reply && (reply->status < 200 || reply->status > 299)) {
        return tl::unexpected(http_error(*reply, method, target));
    }
    return reply;
}

Result<nlohmann::json> ApiClient::exchange_json(std::string_view method, const std::string& target,
                                                const std::string* body) const {
    auto reply = exchange_ok(method, target, body);
    if (!reply) {
        return tl::unexpected(reply.error());
    }
    nlohmann::json doc = nlohmann::json::parse(reply->body, nullptr, false);
    if (doc.is_discarded()) {
        return fail(ErrorCode::Internal,
                    fmt::format("the CARMA daemon's answer to {} {} is not JSON: '{}'; is it the "
                                "same version as this carma?",
                                method, target, excerpt(reply->body)));
    }
    return doc;
}

Result<std::string> ApiClient::exchange_text(const std::string& target) const {
    auto reply = exchange_ok("GET", target);
    if (!reply) {
        return tl::unexpected(reply.error());
    }
    return std::move(reply->body);
}

namespace {

// Unix arguments may be any bytes; JSON strings must be UTF-8.
Result<std::string> task_body_text(const nlohmann::json& body) {
    try {
        return body.dump();
    } catch (const nlohmann::json::type_error& e) {
        return fail(ErrorCode::InvalidArgument,
                    fmt::format("the task's command, name, workdir or environment is not valid "
                                "UTF-8, which the API cannot carry ({})",
                                e.what()));
    }
}

}  // namespace

Result<nlohmann::json> ApiClient::submit(const nlohmann::json& body) {
    auto text = task_body_text(body);
    if (!text) {
        return tl::unexpected(text.error());
    }
    return exchange_json("POST", "/v1/tasks", &*text);
}

Result<nlohmann::json> ApiClient::estimate(const nlohmann::json& body) {
    auto text = task_body_text(body);
    if (!text) {
        return tl::unexpected(text.error());
    }
    return exchange_json("POST", "/v1/estimate", &*text);
}

Result<nlohmann::json> ApiClient::all_pages(const std::string& target) const {
    // A listing comes a page at a time (docs/api.md, "Pages"); the pages' "tasks" are joined
    // and the rest of the answer is the last page's (acct's totals come with it).
    nlohmann::json tasks = nlohmann::json::array();
    std::int64_t after = 0;
    for (;;) {
        std::string page = target;
        add_query(page, "limit", std::to_string(kPageMax));
        if (after > 0) {
            add_query(page, "after", std::to_string(after));
        }
        auto answer = exchange_json("GET", page);
        if (!answer) {
            return answer;
        }
        if (!answer->is_object() || !answer->contains("tasks") || !(*answer)["tasks"].is_array()) {
            return answer;  // not a listing: the caller says what is wrong with it
        }
        for (nlohmann::json& t : (*answer)["tasks"]) {
            tasks.push_back(std::move(t));
        }
        const nlohmann::json next = answer->value("next", nlohmann::json());
        if (!next.is_number_integer() || next.get<std::int64_t>() <= after) {
            (*answer)["tasks"] = std::move(tasks);
            answer->erase("next");
            return answer;
        }
        after = next.get<std::int64_t>();
    }
}

Result<nlohmann::json> ApiClient::list_tasks(bool all) {
    return all_pages(all ? "/v1/tasks?all=1" : "/v1/tasks");
}

Result<nlohmann::json> ApiClient::task(const TaskRef& ref) {
    return exchange_json("GET", fmt::format("/v1/tasks/{}", format_task_ref(ref)));
}

Result<nlohmann::json> ApiClient::cancel(const TaskRef& ref) {
    return exchange_json("DELETE", fmt::format("/v1/tasks/{}", format_task_ref(ref)));
}

Result<nlohmann::json> ApiClient::hold(const TaskRef& ref, bool hold) {
    return exchange_json("POST", fmt::format("/v1/tasks/{}/{}", format_task_ref(ref),
                                             hold ? "hold" : "release"));
}

Result<LogChunk> ApiClient::logs(const TaskRef& ref, const LogRequest& request) {
    std::string target = fmt::format("/v1/tasks/{}/logs", format_task_ref(ref));
    add_query(target, "stream", stream_name(request.stream));
    if (request.attempt) {
        add_query(target, "attempt", std::to_string(*request.attempt));
    }
    if (request.offset > 0) {
        add_query(target, "offset", std::to_string(request.offset));
    }
    auto reply = exchange_ok("GET", target);
    if (!reply) {
        return tl::unexpected(reply.error());
    }
    LogChunk chunk;
    // Without the size header, assume the answer ran to the end of the log.
    chunk.log_size = parse_size(reply->log_size, request.offset + reply->body.size());
    chunk.task_state = std::move(reply->task_state);
    chunk.text = std::move(reply->body);
    return chunk;
}

Result<nlohmann::json> ApiClient::gpus() {
    return exchange_json("GET", "/v1/gpus");
}

Result<nlohmann::json> ApiClient::nodes() {
    return exchange_json("GET", "/v1/nodes");
}

Result<nlohmann::json> ApiClient::share() {
    return exchange_json("GET", "/v1/share");
}

Result<nlohmann::json> ApiClient::drain_nodes(const nlohmann::json& body) {
    const std::string text = body.dump();
    return exchange_json("POST", "/v1/nodes/drain", &text);
}

Result<nlohmann::json> ApiClient::declare_node_lost(const std::string& node) {
    const std::string text = nlohmann::json{{"node", node}}.dump();
    return exchange_json("POST", "/v1/nodes/lost", &text);
}

Result<nlohmann::json> ApiClient::events(const EventQuery& query) {
    std::string target = "/v1/events";
    if (query.after) {
        add_query(target, "after", std::to_string(*query.after));
    }
    if (query.task) {
        add_query(target, "task", std::to_string(*query.task));
    }
    if (query.limit) {
        add_query(target, "limit", std::to_string(*query.limit));
    }
    return exchange_json("GET", target);
}

Result<nlohmann::json> ApiClient::acct(const AcctRequest& request) {
    std::string target = "/v1/acct";
    if (request.user) {
        add_query(target, "user", query_escape(*request.user));
    }
    if (request.state) {
        add_query(target, "state", query_escape(*request.state));
    }
    if (request.since) {
        add_query(target, "since", fmt::format("{:.3f}", *request.since));
    }
    return all_pages(target);
}

Result<nlohmann::json> ApiClient::view() {
    return exchange_json("GET", "/v1/view");
}

Result<nlohmann::json> ApiClient::status() {
    return exchange_json("GET", "/v1/status");
}

Result<std::string> ApiClient::metrics() {
    return exchange_text("/metrics");
}

Result<std::string> ApiClient::healthz() {
    return exchange_text("/healthz");
}

}  // namespace carma::api
