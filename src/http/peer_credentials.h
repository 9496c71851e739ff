#pragma once
// Who is at the other end of a Unix-socket connection, as the kernel says.

#include <sys/types.h>

#include "core/result.h"

namespace carma::http {

// The peer of a Unix-socket connection as the kernel recorded it at connect(2).
struct PeerCredentials {
    uid_t uid = 0;
    gid_t gid = 0;
    pid_t pid = 0;  // for logs only: the process may be gone and its pid reused
};

// SO_PEERCRED of a connected AF_UNIX socket. unix(7): "The returned credentials are those that
// were in effect at the time of the call to connect(2) or socketpair(2)", so they stay those of
// the connecting process even after it hands the socket to another and exits.
Result<PeerCredentials> peer_credentials(int fd);

}  // namespace carma::http
