#include "device/dl_library.h"

#include <dlfcn.h>

#include <utility>

#include <fmt/format.h>

namespace carma::device {

void SharedLibrary::Close::operator()(void* handle) const {
    ::dlclose(handle);
}

SharedLibrary::SharedLibrary(void* handle, std::string path)
    : handle_(handle), path_(std::move(path)) {}

Result<SharedLibrary> SharedLibrary::open(const std::vector<std::string>& candidates,
                                          Unload unload) {
    const int flags = RTLD_NOW | RTLD_LOCAL | (unload == Unload::Never ? RTLD_NODELETE : 0);
    std::string first_reason = "no library to load";
    for (const std::string& path : candidates) {
        if (void* handle = ::dlopen(path.c_str(), flags); handle != nullptr) {
            return SharedLibrary(handle, path);
        }
        const char* why = ::dlerror();  // read every time: it also clears the error state
        if (&path == &candidates.front()) {
            std::string text = why != nullptr ? why : "cannot load it";
            if (text.find(path) == std::string::npos) {  // dlerror usually names it; make sure
                text = fmt::format("{}: {}", path, text);
            }
            first_reason = std::move(text);
        }
    }
    return fail(ErrorCode::Io, std::move(first_reason));
}

void* SymbolTable::lookup(const char* name) const {
    return ::dlsym(handle_, name);
}

}  // namespace carma::device
