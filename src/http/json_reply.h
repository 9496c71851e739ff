#pragma once
// JSON answers that go out whatever bytes they quote: nlohmann's dump() throws (type_error.316)
// on a string that is not UTF-8, and an error message may quote a client's bytes (a path, a
// parser's "last read"), so invalid sequences are replaced with U+FFFD instead.

#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "http/message.h"

namespace carma::http {

inline std::string json_text(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline void send_json(Response& res, int status, const nlohmann::json& body) {
    res.status = status;
    res.set_content(json_text(body), "application/json");
}

// What a handler threw, for the 500 that answers it ("unknown error" for a non-exception).
inline std::string exception_text(std::exception_ptr ep) {
    try {
        std::rethrow_exception(ep);
    } catch (const std::exception& e) {
        return e.what();
    } catch (...) {
    }
    return "unknown error";
}

}  // namespace carma::http
