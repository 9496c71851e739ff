#pragma once
// The web page's files (src/web/), compiled into the daemon: no install paths to find, no CDN.

#include <optional>
#include <string>
#include <string_view>

namespace carma::api {

struct WebAsset {
    std::string_view body;
    const char* content_type;
};

// The file served at `path` ("/" is the page itself), or nothing when there is none.
std::optional<WebAsset> web_asset(std::string_view path);

}  // namespace carma::api
