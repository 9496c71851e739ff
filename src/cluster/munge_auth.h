#pragma once
// Authentication of reports and answers in MUNGE mode (Slurm clusters, where every node runs
// munged with the same key): libmunge's credentials instead of HMACs, the same framing as token
// mode (cluster/auth.h).
//
// Every credential is restricted to the uid of the one process that must read it
// (MUNGE_OPT_UID_RESTRICTION): a request to the server's uid, an answer to the agents' uid. By
// munge's design any local user of a munge host can decode an unrestricted credential, so
// without it whoever captured a sealed launch (its command line and environment) could read it;
// with it munged decodes it for that uid alone (not even for root, unless root is that uid).
//
// A request carries, in kAuthHeader, "carma1 munge <credential>" whose payload is
//   "carma-munge-request v1\n" node|ts|nonce|len|SHA-256(body)
// so the server learns who sent it (munged vouches for the uid and the encoding host) before it
// reads the body. The body travels as a second credential (munge_seal; munged's default cipher
// encrypts it, zlib compresses it where that helps) whose payload is "carma-munge-body v1\n" +
// the JSON; opening it checks the uid and that the JSON's SHA-256 is the one of the header, so
// neither part verifies without the other. The answer is the same: "carma1 munge <credential>"
// of "carma-munge-answer v1\n" ts|request nonce|len|SHA-256(body), and a sealed body.
//
// munged itself refuses a credential decoded before (replayed) or older than its TTL (300 s by
// default), on top of the timestamp window and the server's ReplayGuard.
//
// Size: munged 0.5.15 (Debian 12) takes at most MUNGE_MAXIMUM_REQ_LEN = 1 MiB per request. A
// credential is base64, about 4/3 of its compressed payload plus ~120 bytes, and must fit in that
// 1 MiB to be decoded; the uncompressed payload must fit too, when it is encoded and when it is
// decoded. So a body is at most kMungeMaxBody bytes, and one that compresses poorly (random data)
// at most about 786,000; JSON compresses 4-8 times with zlib. (munge 0.5.17 raised the limits to a
// 1 MiB payload in a 2 MiB request.)
//
// Errors: munged not answering is ErrorCode::Io (names the socket; the server answers 503);
// every refusal of a credential is ErrorCode::InvalidArgument (401). Safe from several threads:
// each call has its own libmunge context.

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/auth.h"
#include "core/result.h"

namespace carma::cluster::auth {

// The longest body munge_seal takes (payload prefix included, below munged 0.5.15's 1 MiB).
inline constexpr std::size_t kMungeMaxBody = 1000 * 1000;

struct MungeDecoded {
    std::string payload;
    uid_t uid = 0;  // the encoding process's uid and gid, as munged vouches
    gid_t gid = 0;
    std::string origin_addr;  // dotted IPv4 of the encoding host ("0.0.0.0" when munged had none)
};

// A connection to munged through its socket. Cheap to copy.
class Munge {
public:
    enum class Zip { None, Zlib };

    // `socket_path` "" means libmunge's default (/run/munge/munge.socket.2). Checks that munged
    // answers there by encoding an empty credential.
    static Result<Munge> open(std::string socket_path = "");

    // `reader`: the only uid munged will decode it for (MUNGE_OPT_UID_RESTRICTION); nothing:
    // any uid may.
    Result<std::string> encode(std::string_view payload, Zip zip = Zip::None,
                               std::optional<uid_t> reader = std::nullopt) const;
    // Refuses a credential munged finds invalid (another key: every node needs the same
    // munge.key), expired, encoded in the future or replayed (the message says "replayed").
    Result<MungeDecoded> decode(std::string_view credential) const;

    const std::string& socket() const { return socket_; }

private:
    Munge(std::string socket, bool explicit_socket)
        : socket_(std::move(socket)), explicit_socket_(explicit_socket) {}

    std::string socket_;  // the resolved path, for messages
    bool explicit_socket_ = false;
};

// The request's header value ("carma1 munge <credential>") for `node`'s `body` at `now_unix`,
// decodable by the server's uid `reader` alone.
Result<std::string> munge_request_header(const Munge& munge, std::string_view node,
                                         std::string_view body, double now_unix, uid_t reader);
Result<std::string> munge_request_header(const Munge& munge, std::string_view node,
                                         std::string_view body, double now_unix, uid_t reader,
                                         std::string_view nonce);

// Decodes and checks a request header: the credential (munged), its uid against
// `expected_uid`, its payload (strictly), the timestamp window. The head's mode is Munge; its
// uid, gid and origin_addr are munged's; body_sha256 is what verify_munge_body will demand.
Result<RequestHead> verify_munge_head(const Munge& munge, std::string_view header,
                                      uid_t expected_uid, double now_unix,
                                      double window_s = kDefaultWindowS);

// The body as sent in MUNGE mode: a credential of it (compressed by zlib where it helps) that
// munged decodes for the peer's uid `reader` alone. Refuses a body longer than kMungeMaxBody.
Result<std::string> munge_seal(const Munge& munge, std::string_view body, uid_t reader);

// The body a sealed credential holds, once munged accepts it, its uid is `expected_uid` and the
// body's SHA-256 is `expected_sha256` (from the header that came with it).
Result<std::string> munge_open(const Munge& munge, std::string_view credential,
                               uid_t expected_uid, std::string_view expected_sha256);

// munge_open against what verify_munge_head accepted: the same uid, the header's SHA-256 and
// length. The JSON of the report.
Result<std::string> verify_munge_body(const Munge& munge, const RequestHead& head,
                                      std::string_view sealed_body);

// The answer's header value, bound to the request's nonce, decodable by the agents' uid `reader`
// alone.
Result<std::string> munge_answer_header(const Munge& munge, std::string_view request_nonce,
                                        std::string_view body, double now_unix, uid_t reader);

// The answer's JSON, once its header and sealed body verify: encoded by `expected_uid` (the
// server's), bound to `request_nonce`, within the window.
Result<std::string> verify_munge_answer(const Munge& munge, std::string_view header,
                                        uid_t expected_uid, std::string_view request_nonce,
                                        std::string_view sealed_body, double now_unix,
                                        double window_s = kDefaultWindowS);

}  // namespace carma::cluster::auth
