#pragma once
// Loading a vendor library (NVML, DCGM, the CUDA driver) at run time with dlopen, so that
// building needs nothing from NVIDIA and a machine without the library gets a one-line reason
// naming it instead of a loader error at start-up.

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace carma::device {

// Owns a dlopen handle; move-only, closes when destroyed. A backend holds it as a member
// declared before anything that calls into the library, so it closes last.
class SharedLibrary {
  public:
    enum class Unload {
        OnClose,  // dlclose unmaps the library once nothing else holds it
        Never,    // RTLD_NODELETE: for libraries that start threads of their own, which could
                  // otherwise outlive their code
    };

    // The first of `candidates` that loads. Libraries load with RTLD_NOW | RTLD_LOCAL, so their
    // symbols neither leak into nor are captured by anything loaded later. When none loads, the
    // error (ErrorCode::Io) is the first candidate's dlerror() text, made to name its path; the
    // caller adds what the library is for.
    static Result<SharedLibrary> open(const std::vector<std::string>& candidates,
                                      Unload unload = Unload::OnClose);

    void* handle() const { return handle_.get(); }
    const std::string& path() const { return path_; }  // the candidate that loaded

  private:
    struct Close {
        void operator()(void* handle) const;
    };

    SharedLibrary(void* handle, std::string path);

    std::unique_ptr<void, Close> handle_;
    std::string path_;
};

// Looks entry points up by name and remembers which required ones were missing, so that one
// message can list them all.
class SymbolTable {
  public:
    explicit SymbolTable(const SharedLibrary& library) : handle_(library.handle()) {}

    // Nullptr when the library lacks it.
    template <typename Fn>
    Fn find(const char* name) const {
        // POSIX guarantees a data pointer from dlsym can hold a function's address.
        return reinterpret_cast<Fn>(lookup(name));
    }

    template <typename Fn>
    void require(const char* name, Fn& slot) {
        slot = find<Fn>(name);
        if (slot == nullptr) {
            missing_.emplace_back(name);
        }
    }

    // The first of `names` the library has (newest first); `found`, when given, says which,
    // for messages.
    template <typename Fn>
    Fn find_first(std::initializer_list<const char*> names, const char** found = nullptr) const {
        for (const char* name : names) {
            if (auto fn = find<Fn>(name); fn != nullptr) {
                if (found != nullptr) {
                    *found = name;
                }
                return fn;
            }
        }
        return nullptr;
    }

    void note_missing(std::string what) { missing_.push_back(std::move(what)); }
    const std::vector<std::string>& missing() const { return missing_; }

  private:
    void* lookup(const char* name) const;

    void* handle_;
    std::vector<std::string> missing_;
};

}  // namespace carma::device
