#pragma once
// Which requests a browser may have made on someone's behalf, decided from the request's head
// alone (before its body is read, before any handler runs).
//
// The threats (issue 18): a web page the user visits while an SSH tunnel to the daemon's socket
// is open (the user guide's advice) may send requests to it with the user's identity — the tunnel
// connects as the user — and a page on a name the attacker re-points at 127.0.0.1 (DNS
// rebinding) may even read the answers. What stops them:
//   1. `Host` must name this machine: `localhost`, a loopback address, or a name the admin
//      listed (`allowed_hosts`); on the Unix socket also a socket path, which no browser sends.
//      A rebinding page's requests carry the attacker's name.
//   2. Fetch metadata: a request a browser marks `Sec-Fetch-Site: cross-site` or `same-site`
//      (another port of localhost is the same site) is refused, except a plain navigation to a
//      page (GET, `Sec-Fetch-Mode: navigate`), which shows the user their own data and nothing
//      to the page that linked it.
//   3. `Origin`, where a browser sent one, must be the request's own (`http(s)://` + Host).
//   4. A request with a body that changes something must say `Content-Type: application/json`:
//      a cross-origin page can send that type only after a CORS preflight, which CARMA never
//      approves, so even a browser without fetch metadata cannot forge a submission.
//   5. A browser's own requests to the API (`Sec-Fetch-Mode` cors, no-cors, same-origin) must
//      carry `X-Carma-Page: 1`, which CARMA's page sends: a custom header, so again only after a
//      preflight from any other origin.
// Clients that are not browsers (the CLI, curl, scripts) send none of the browser's headers and
// pass 2, 3 and 5 untouched.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/service.h"

namespace carma::api {

// What the guard looks at; empty strings stand for headers the request did not carry.
struct RequestHead {
    std::string method;
    std::string path;
    std::optional<std::string> host;
    std::string origin;
    std::string sec_fetch_site;
    std::string sec_fetch_mode;
    std::string content_type;
    std::string carma_page;  // X-Carma-Page
    bool has_body = false;   // Content-Length > 0 or a chunked body
};

struct GuardOptions {
    // Names (without port) accepted in Host besides localhost and loopback addresses.
    std::vector<std::string> allowed_hosts;
    bool unix_socket = false;  // a socket path is then a valid Host too
};

inline constexpr std::string_view kPageHeader = "X-Carma-Page";

// The refusal for a request a browser may have made on someone's behalf (status and a message
// that names the header and what to do), or nothing when it may go on.
std::optional<ApiError> check_request_head(const RequestHead& head, const GuardOptions& options);

// Whether HOST names this machine's loopback interface only (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(std::string_view host);

// The host part of a Host header value ("[::1]:8080" -> "::1", "Gpu-Server:80" -> "gpu-server",
// lower case); nullopt when it is not a host[:port].
std::optional<std::string> host_of(std::string_view host_header);

}  // namespace carma::api
