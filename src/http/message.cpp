#include "http/message.h"

#include <strings.h>

#include <algorithm>
#include <cctype>

namespace carma::http {

bool CaseInsensitiveLess::operator()(const std::string& a, const std::string& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
        return std::tolower(static_cast<unsigned char>(x)) <
               std::tolower(static_cast<unsigned char>(y));
    });
}

bool Request::has_header(const std::string& name) const { return headers.count(name) > 0; }

std::string Request::get_header_value(const std::string& name, const char* fallback) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string(fallback) : it->second;
}

bool Request::has_param(const std::string& name) const { return params.count(name) > 0; }

std::string Request::get_param_value(const std::string& name) const {
    const auto it = params.find(name);
    return it == params.end() ? std::string() : it->second;
}

bool Response::has_header(const std::string& name) const { return headers.count(name) > 0; }

std::string Response::get_header_value(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
}

namespace {

bool safe_field(const std::string& s) {
    return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos;
}

}  // namespace

void Response::set_header(const std::string& name, const std::string& value) {
    if (name.empty() || !safe_field(name) || !safe_field(value) ||
        name.find(':') != std::string::npos) {
        return;
    }
    headers.erase(name);
    headers.emplace(name, value);
}

void Response::set_content(std::string content, const std::string& content_type) {
    body = std::move(content);
    set_header("Content-Type", content_type);
}

void Response::set_redirect(const std::string& location, int redirect_status) {
    set_header("Location", location);
    status = redirect_status >= 300 && redirect_status < 400 ? redirect_status : 302;
}

const char* reason_phrase(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 201: return "Created";
        case 202: return "Accepted";
        case 204: return "No Content";
        case 206: return "Partial Content";
        case 301: return "Moved Permanently";
        case 302: return "Found";
        case 303: return "See Other";
        case 304: return "Not Modified";
        case 307: return "Temporary Redirect";
        case 308: return "Permanent Redirect";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 408: return "Request Timeout";
        case 409: return "Conflict";
        case 410: return "Gone";
        case 411: return "Length Required";
        case 413: return "Payload Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 422: return "Unprocessable Entity";
        case 429: return "Too Many Requests";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 501: return "Not Implemented";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 507: return "Insufficient Storage";
        default: return "Unknown";
    }
}

}  // namespace carma::http
