#pragma once
// What `ssh -N -L PORT:/path/carma.sock you@server` gives a user's browser, on this host: a TCP
// listener on 127.0.0.1 whose every connection is piped, byte for byte, to a new connection to
// the daemon's Unix socket. The socket sees the relay's process (this test's uid) as its peer,
// as it would see sshd running as the user. One thread accepts; one thread per connection pumps
// both directions until either side closes.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace carma::test_support {

class UnixSocketRelay {
public:
    explicit UnixSocketRelay(std::string socket_path) : socket_path_(std::move(socket_path)) {
        if (socket_path_.size() >= sizeof(sockaddr_un{}.sun_path)) {
            throw std::runtime_error("socket path too long for a Unix socket: " + socket_path_);
        }
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
            ::listen(listener_, 64) != 0 ||
            ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            const std::string why = std::strerror(errno);
            if (listener_ >= 0) {
                ::close(listener_);
            }
            throw std::runtime_error("the relay cannot listen on 127.0.0.1: " + why);
        }
        port_ = ntohs(addr.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }

    ~UnixSocketRelay() {
        stop_ = true;
        acceptor_.join();  // no connection is added after this
        std::vector<std::thread> pumps;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            pumps.swap(pumps_);
        }
        for (std::thread& t : pumps) {
            t.join();  // each ends within its poll interval, once it sees stop_
        }
        ::close(listener_);
    }

    UnixSocketRelay(const UnixSocketRelay&) = delete;
    UnixSocketRelay& operator=(const UnixSocketRelay&) = delete;

    int port() const { return port_; }

    // Connections accepted so far (each one piped to its own connection to the socket).
    int connections() const { return connections_; }

    // Closes every connection piped now, as ending and restarting `ssh -L` would; returns once
    // they are closed. A browser keeps idle connections open for reuse, and the daemon lets one
    // uid hold only a few, so a test that opens pages through the relay closes them before it
    // talks to the socket itself.
    void close_connections() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (int fd : open_) {
                ::shutdown(fd, SHUT_RDWR);
            }
        }
        while (true) {
            {
                std::lock_guard<std::mutex> lock(mutex_);
                if (open_.empty()) {
                    return;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

private:
    void accept_loop() {
        while (!stop_) {
            pollfd p{listener_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) {
                continue;
            }
            const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) {
                continue;
            }
            const int upstream = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            sockaddr_un addr{};
            addr.sun_family = AF_UNIX;
            std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof(addr.sun_path) - 1);
            if (upstream < 0 ||
                ::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
                // As ssh does when the remote end refuses: the local connection just closes.
                ::close(client);
                if (upstream >= 0) {
                    ::close(upstream);
                }
                continue;
            }
            ++connections_;
            std::lock_guard<std::mutex> lock(mutex_);
            open_.insert(client);
            open_.insert(upstream);
            pumps_.emplace_back([this, client, upstream] { pump(client, upstream); });
        }
    }

    // Copies whatever either side sends to the other until one of them closes or fails.
    void pump(int a, int b) {
        char buffer[65536];
        bool open = true;
        while (open && !stop_) {
            pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
            if (::poll(p, 2, 100) <= 0) {
                continue;
            }
            for (int i = 0; i < 2 && open; ++i) {
                if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
                    continue;
                }
                const int from = p[i].fd;
                const int to = i == 0 ? b : a;
                const ssize_t n = ::read(from, buffer, sizeof buffer);
                if (n <= 0) {
                    open = false;
                    break;
                }
                for (ssize_t sent = 0; sent < n;) {
                    const ssize_t w = ::send(to, buffer + sent, static_cast<std::size_t>(n - sent),
                                             MSG_NOSIGNAL);
                    if (w <= 0) {
                        open = false;
                        break;
                    }
                    sent += w;
                }
            }
        }
        std::lock_guard<std::mutex> lock(mutex_);
        open_.erase(a);
        open_.erase(b);
        ::close(a);
        ::close(b);
    }

    std::string socket_path_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> connections_{0};
    std::thread acceptor_;
    std::mutex mutex_;  // guards pumps_ and open_
    std::vector<std::thread> pumps_;
    std::set<int> open_;  // both ends of every connection being piped
};

}  // namespace carma::test_support
