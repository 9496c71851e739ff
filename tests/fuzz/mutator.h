#pragma once
// A small deterministic mutation fuzzer for the parsers of untrusted text. No coverage feedback
// and no clang needed: each run draws the same inputs from a fixed seed, so a failure in CI
// reproduces with the same binary, and sanitizer builds (ASan+UBSan) run the same loop.
//
// Inputs start from real files (seeds) and are changed by a few stacked mutations: bit flips,
// byte insertion and deletion, block duplication, splicing with another seed, and tokens from a
// dictionary (the syntax of the format, numbers at the edges of the integer and double ranges,
// unicode, very long runs). Inputs that the parser accepts join the pool (bounded), so later
// mutations start from valid-but-odd text and reach deeper than one mutation of a seed would.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace carma::fuzz {

// The least every target runs in CI; CARMA_FUZZ_RUNS may only raise it.
inline constexpr std::size_t kMinRuns = 20000;

inline std::size_t runs() {
    if (const char* env = std::getenv("CARMA_FUZZ_RUNS")) {
        return std::max<std::size_t>(kMinRuns, std::strtoull(env, nullptr, 10));
    }
    return kMinRuns;
}

// Each target's own stream of inputs; CARMA_FUZZ_SEED=N draws another one for all of them.
inline std::uint64_t seed_for(std::uint64_t target) {
    std::uint64_t extra = 0;
    if (const char* env = std::getenv("CARMA_FUZZ_SEED")) {
        extra = std::strtoull(env, nullptr, 10);
    }
    return target * 0x100000001b3ULL ^ extra;
}

// splitmix64: tiny, well mixed, and its output is the same on every platform and standard
// library (std::uniform_int_distribution is not), which keeps the inputs reproducible.
class Rng {
public:
    explicit Rng(std::uint64_t seed) : state_(seed) {}
    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform enough in [0, n) for n far below 2^64; n == 0 gives 0.
    std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
    bool chance(unsigned percent) { return below(100) < percent; }

private:
    std::uint64_t state_;
};

// Tokens every target gets: numbers at the edges of int, int64, uint64 and double, signs,
// special floats, unicode (multi-byte, a BOM, an overlong and a lone surrogate), control bytes.
inline std::vector<std::string> common_tokens() {
    return {"0",
            "-1",
            "-0",
            "1",
            "+1",
            "2147483647",
            "2147483648",
            "-2147483649",
            "4294967296",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999999999999",
            "1e308",
            "1e309",
            "-1e309",
            "1e-320",
            "4.9e-324",
            "0x10",
            "1.5",
            ".5",
            "5.",
            "NaN",
            "nan",
            "-nan",
            "inf",
            "-inf",
            "Infinity",
            "1e15",
            "16777216",
            "16777217",
            " ",
            "\t",
            "\n",
            "\r\n",
            std::string(1, '\0'),
            "\x7f",
            "\xff",
            "\xc0\x80",
            "\xed\xa0\x80",
            "\xef\xbb\xbf",
            "\xc3\xa9",
            "\xe2\x82\xac",
            "\xf0\x9f\x98\x80",
            "\\",
            "'",
            "\"",
            "%s%n",
            "{}",
            "{:}"};
}

class Mutator {
public:
    Mutator(std::uint64_t seed, std::vector<std::string> seeds, std::vector<std::string> tokens,
            std::size_t max_size = 16 * 1024)
        : rng_(seed), pool_(std::move(seeds)), seed_count_(pool_.size()),
          tokens_(std::move(tokens)), max_size_(max_size) {
        for (std::string& t : common_tokens()) {
            tokens_.push_back(std::move(t));
        }
        if (pool_.empty()) {
            pool_.emplace_back();
            seed_count_ = 1;
        }
    }

    // The next input: a pool entry changed by one to four mutations.
    std::string next() {
        std::string s = pool_[rng_.below(pool_.size())];
        const std::size_t rounds = 1 + rng_.below(4);
        for (std::size_t i = 0; i < rounds; ++i) {
            mutate(s);
        }
        if (s.size() > max_size_) {
            s.resize(max_size_);
        }
        return s;
    }

    // An input the parser accepted: worth mutating further. Added ones replace each other once
    // the pool is full, so memory stays bounded and the seeds are never lost.
    void keep(const std::string& input) {
        constexpr std::size_t kMaxKept = 256;
        if (pool_.size() < seed_count_ + kMaxKept) {
            pool_.push_back(input);
        } else {
            pool_[seed_count_ + rng_.below(kMaxKept)] = input;
        }
    }

    Rng& rng() { return rng_; }

private:
    const std::string& token() { return tokens_[rng_.below(tokens_.size())]; }

    std::size_t pos(const std::string& s) { return rng_.below(s.size() + 1); }

    void mutate(std::string& s) {
        switch (rng_.below(11)) {
            case 0:  // flip one bit
                if (!s.empty()) {
                    s[rng_.below(s.size())] ^= static_cast<char>(1u << rng_.below(8));
                }
                break;
            case 1:  // set a byte to anything
                if (!s.empty()) {
                    s[rng_.below(s.size())] = static_cast<char>(rng_.below(256));
                }
                break;
            case 2:  // insert a random byte
                s.insert(pos(s), 1, static_cast<char>(rng_.below(256)));
                break;
            case 3: {  // delete a range
                if (s.empty()) {
                    break;
                }
                const std::size_t at = rng_.below(s.size());
                s.erase(at, 1 + rng_.below(std::min<std::size_t>(s.size() - at, 16)));
                break;
            }
            case 4:
            case 5:  // insert a dictionary token (twice as likely: it is what finds edge cases)
                s.insert(pos(s), token());
                break;
            case 6: {  // replace a run of digits (a field's number, usually) with a token
                std::size_t at = pos(s);
                while (at < s.size() && !(s[at] >= '0' && s[at] <= '9')) {
                    ++at;
                }
                std::size_t end = at;
                while (end < s.size() && ((s[end] >= '0' && s[end] <= '9') || s[end] == '.')) {
                    ++end;
                }
                s.replace(std::min(at, s.size()), end - std::min(at, s.size()), token());
                break;
            }
            case 7: {  // duplicate a block in place
                if (s.empty()) {
                    break;
                }
                const std::size_t at = rng_.below(s.size());
                const std::size_t len = 1 + rng_.below(std::min<std::size_t>(s.size() - at, 64));
                s.insert(at, s.substr(at, len));
                break;
            }
            case 8: {  // splice: our head with another pool entry's tail
                const std::string& other = pool_[rng_.below(pool_.size())];
                s = s.substr(0, pos(s)) + other.substr(rng_.below(other.size() + 1));
                break;
            }
            case 9: {  // a very long run of one byte or one token (buffers, quadratic paths)
                const std::size_t n = 64 + rng_.below(max_size_ / 2);
                std::string run;
                if (rng_.chance(50)) {
                    run.assign(n, static_cast<char>(rng_.below(2) ? 'a' : "9[{ ,:-\n"[rng_.below(8)]));
                } else {
                    const std::string& t = token();
                    while (run.size() < n && !t.empty()) {
                        run += t;
                    }
                }
                s.insert(pos(s), run);
                break;
            }
            default:  // truncate
                s.resize(pos(s));
                break;
        }
    }

    Rng rng_;
    std::vector<std::string> pool_;
    std::size_t seed_count_;
    std::vector<std::string> tokens_;
    std::size_t max_size_;
};

// The input as a C string literal, shortened, for a failure message that reproduces it.
inline std::string escaped(std::string_view s, std::size_t limit = 600) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "\"";
    for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == '\\' || c == '"') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
            out += "\"\"";  // so a following hex digit does not join the escape
        }
    }
    out += '"';
    if (s.size() > limit) {
        out += " ... (" + std::to_string(s.size()) + " bytes)";
    }
    return out;
}

}  // namespace carma::fuzz
