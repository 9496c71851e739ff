#pragma once
// Private to src/store/: the schema, as the one list of migrations that brings a file to
// kSchemaVersion (store.h), and what Store::open checks and sets before it serves a file.

#include <string>

#include "core/result.h"

namespace SQLite {
class Database;
}

namespace carma::store::detail {

// Whether the database's directory exists and this user may create files in it; the error says
// what to fix.
Result<void> check_directory(const std::string& path);

// Refuses a read-only file and sets the journal (WAL), synchronous and foreign key pragmas.
// Throws SQLite::Exception or std::runtime_error; Store::open adds the path.
void configure(SQLite::Database& db);

// Runs the migrations the file lacks and returns its schema version (kSchemaVersion); a file
// with a newer schema than this build knows is refused.
Result<int> migrate(SQLite::Database& db, const std::string& path);

}  // namespace carma::store::detail
