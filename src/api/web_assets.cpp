#include "api/web_assets.h"

#include <array>

#include "data/embedded.h"

namespace carma::api {

namespace {

struct Entry {
    std::string_view path;
    std::string_view embedded_name;
    const char* content_type;
};

constexpr std::array<Entry, 3> kAssets = {{
    {"/", "web/index.html", "text/html; charset=utf-8"},
    {"/app.js", "web/app.js", "text/javascript; charset=utf-8"},
    {"/style.css", "web/style.css", "text/css; charset=utf-8"},
}};

}  // namespace

std::optional<WebAsset> web_asset(std::string_view path) {
    for (const Entry& e : kAssets) {
        if (e.path == path) {
            if (auto body = data::embedded(e.embedded_name)) {
                return WebAsset{*body, e.content_type};
            }
        }
    }
    return std::nullopt;
}

}  // namespace carma::api
