#pragma once
// The two clocks every part reads, in seconds: the wall clock for what is stored and shown (Unix
// time), the steady clock for intervals and deadlines (never jumps with the wall clock).

#include <chrono>

namespace carma::exec {

inline double unix_now() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

inline double steady_now() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

}  // namespace carma::exec
