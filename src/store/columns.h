#pragma once
// Private to src/store/: binding values that may be absent as SQL NULL, shared by the tables.

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

}  // namespace carma::store
