#pragma once
// A JSON number as a C++ number without undefined behaviour. nlohmann's get<int>() on 1e300
// is a float-to-int conversion out of range (undefined) and get<unsigned>() on -1 wraps; text
// from another machine must reach neither. Integers must be integral and within the target type;
// doubles must be finite (nlohmann's parser refuses "1e999", a value built in code may be inf).

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>

#include <nlohmann/json.hpp>

namespace carma {

// The value of `v` as a T, or nullopt when `v` is not a number or does not fit: for an integral
// T, an integral value within T's range (5.0 is 5, 5.5 is refused); for a floating T, a finite
// value within T's range.
template <typename T>
std::optional<T> json_number(const nlohmann::json& v) {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
    if constexpr (std::is_floating_point_v<T>) {
        if (!v.is_number()) {
            return std::nullopt;
        }
        const double d = v.get<double>();  // from an integer: rounds, never undefined
        if (!std::isfinite(d) || std::fabs(d) > static_cast<double>(std::numeric_limits<T>::max())) {
            return std::nullopt;
        }
        return static_cast<T>(d);
    } else {
        if (v.is_number_unsigned()) {
            const auto u = v.get<std::uint64_t>();
            return std::in_range<T>(u) ? std::optional<T>(static_cast<T>(u)) : std::nullopt;
        }
        if (v.is_number_integer()) {
            const auto i = v.get<std::int64_t>();
            return std::in_range<T>(i) ? std::optional<T>(static_cast<T>(i)) : std::nullopt;
        }
        if (!v.is_number_float()) {
            return std::nullopt;
        }
        const double d = v.get<double>();
        // [lower, upper) with both ends powers of two, so exact as doubles: 2^digits is one past
        // T's maximum, and -2^digits T's minimum when T is signed.
        const double upper = std::ldexp(1.0, std::numeric_limits<T>::digits);
        const double lower = std::is_signed_v<T> ? -upper : 0.0;
        if (!std::isfinite(d) || std::trunc(d) != d || d < lower || d >= upper) {
            return std::nullopt;
        }
        return static_cast<T>(d);
    }
}

}  // namespace carma
