// Mutation fuzzing (tests/fuzz/mutator.h) of what an unauthenticated peer controls in token
// mode: the request header the server reads before the body, and the answer header the agent
// reads. The property: no crash, no exception, no sanitizer report, an error with a message for
// every input, and nothing accepted but a header exactly as it was signed (the head MAC covers
// every field). CARMA_FUZZ_RUNS raises the number of inputs per target; CARMA_FUZZ_SEED draws
// another sequence (as for tests/fuzz/fuzz_tests.cpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "cluster/auth.h"
#include "fuzz/mutator.h"

namespace carma::cluster::auth {
namespace {

constexpr double kNow = 1700000000.5;
const std::string kMaster = "fuzz-master-token-0123456789abcdef";
const std::string kNonce = "0123456789abcdef0123456789abcdef";
using fuzz::runs;
using fuzz::seed_for;

std::vector<std::string> header_tokens() {
    return {"carma1", "token", "munge", " ", "  ", "node=", "ts=", "nonce=", "len=", "body=",
            "head=", "mac=", "=", "==", "gpu-01", std::string(255, 'n'), std::string(256, 'n'),
            std::string(32, 'f'), std::string(64, '0'), std::string(64, 'F'), "1700000000.500",
            "1700000000", "999999999999", "1000000000000", "0.0000000001", "00", "-0"};
}

// Each input goes through `verify`; true means accepted. An accepted input must be one of the
// seeds, byte for byte; a rejected one has a message.
void fuzz(const char* target, std::uint64_t seed, const std::vector<std::string>& seeds,
          const std::function<Result<void>(const std::string&)>& verify) {
    for (const std::string& s : seeds) {
        auto ok = verify(s);
        ASSERT_TRUE(ok) << target << ": a seed does not verify: " << ok.error().message;
    }
    const std::set<std::string> signed_as(seeds.begin(), seeds.end());
    fuzz::Mutator mutator(seed_for(seed), seeds, header_tokens(), 4096);
    std::size_t accepted = 0;
    const std::size_t n = runs();
    for (std::size_t i = 0; i < n; ++i) {
        const std::string input = mutator.next();
        try {
            auto result = verify(input);
            if (result) {
                ++accepted;
                ASSERT_TRUE(signed_as.contains(input))
                    << target << ": accepted a header that was never signed: "
                    << fuzz::escaped(input);
            } else {
                ASSERT_FALSE(result.error().message.empty()) << fuzz::escaped(input);
                ASSERT_EQ(result.error().code, ErrorCode::InvalidArgument) << fuzz::escaped(input);
            }
        } catch (const std::exception& e) {
            FAIL() << target << ": exception escaped on input " << i << ": " << e.what()
                   << "\ninput: " << fuzz::escaped(input);
        }
    }
    std::cout << target << ": " << n << " inputs, " << accepted << " accepted (unchanged seeds)\n";
}

TEST(FuzzAuth, RequestHeadNeverThrowsAndAcceptsOnlyWhatWasSigned) {
    std::vector<std::string> seeds;
    for (const auto& [node, body] :
         std::vector<std::pair<std::string, std::string>>{{"gpu-01", R"({"gpus":[]})"},
                                                          {"n", ""},
                                                          {std::string(255, 'x'), "body"}}) {
        auto header = sign_request(node_key(kMaster, node), node, body, kNow, kNonce);
        ASSERT_TRUE(header) << header.error().message;
        seeds.push_back(*header);
    }
    const KeyOf keys = keys_from_master(kMaster);
    fuzz("request head", 101, seeds, [&](const std::string& input) -> Result<void> {
        auto head = verify_request_head(input, keys, kNow);
        if (!head) {
            return tl::unexpected(head.error());
        }
        return {};
    });
}

TEST(FuzzAuth, AnswerNeverThrowsAndAcceptsOnlyWhatWasSigned) {
    const std::string key = node_key(kMaster, "gpu-01");
    const std::string body = R"({"commands":[]})";
    auto header = sign_answer(key, kNonce, body, kNow);
    ASSERT_TRUE(header) << header.error().message;
    fuzz("answer", 102, {*header}, [&](const std::string& input) {
        return verify_answer(input, key, kNonce, body, kNow);
    });
}

}  // namespace
}  // namespace carma::cluster::auth
