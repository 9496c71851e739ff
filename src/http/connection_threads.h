#pragma once
// One thread per open connection of an HTTP listener, started on demand up to `max` and then
// kept; beyond it connections wait in order. A fixed pool of about the number of cores would
// let a handful of slow clients hold every thread and leave the next request waiting.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace carma::http {

class ConnectionThreads {
public:
    explicit ConnectionThreads(std::size_t max) : max_(max) {}
    ~ConnectionThreads() { shutdown(); }
    ConnectionThreads(const ConnectionThreads&) = delete;
    ConnectionThreads& operator=(const ConnectionThreads&) = delete;

    void enqueue(std::function<void()> job);
    // Runs what was enqueued, then joins every thread; nothing may be enqueued after it.
    void shutdown();

private:
    void work();

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    std::size_t idle_ = 0;
    std::size_t max_;
    bool stopping_ = false;
};

}  // namespace carma::http
