#include "http/connection_threads.h"

namespace carma::http {

void ConnectionThreads::enqueue(std::function<void()> job) {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
    if (idle_ < jobs_.size() && threads_.size() < max_) {
        threads_.emplace_back([this] { work(); });
    }
    cv_.notify_one();
}

void ConnectionThreads::shutdown() {
    std::vector<std::thread> threads;
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
        threads.swap(threads_);
    }
    cv_.notify_all();
    for (std::thread& t : threads) {
        t.join();
    }
}

void ConnectionThreads::work() {
    std::unique_lock lock(mu_);
    for (;;) {
        ++idle_;
        cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
        --idle_;
        if (jobs_.empty()) {
            return;  // stopping, and every accepted connection has been served
        }
        std::function<void()> job = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        job();
        lock.lock();
    }
}

}  // namespace carma::http
