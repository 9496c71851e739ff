#pragma once
// Private to src/store/: binding and reading values that may be absent as SQL NULL, shared by the
// tables.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

namespace carma::store {

template <typename T>
void bind_optional(SQLite::Statement& st, int index, const std::optional<T>& value) {
    if (value) {
        st.bind(index, *value);
    } else {
        st.bind(index);
    }
}

// Text columns where "" means "none" in the row and NULL in the table.
inline void bind_text_or_null(SQLite::Statement& st, int index, const std::string& value) {
    if (value.empty()) {
        st.bind(index);
    } else {
        st.bind(index, value);
    }
}

inline std::optional<double> optional_double(const SQLite::Column& c) {
    return c.isNull() ? std::nullopt : std::optional<double>(c.getDouble());
}

inline std::optional<int> optional_int(const SQLite::Column& c) {
    return c.isNull() ? std::nullopt : std::optional<int>(c.getInt());
}

inline std::optional<std::int64_t> optional_int64(const SQLite::Column& c) {
    return c.isNull() ? std::nullopt : std::optional<std::int64_t>(c.getInt64());
}

// SQLite stores a bound NaN as NULL; reading it back as NaN makes the round trip exact.
inline double nullable_double(const SQLite::Column& c) {
    return c.isNull() ? std::numeric_limits<double>::quiet_NaN() : c.getDouble();
}

}  // namespace carma::store
