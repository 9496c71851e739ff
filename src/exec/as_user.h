#pragma once
// Looking at the file system with a user's rights rather than the daemon's. A root daemon that
// checked a submission's working directory and command with its own rights would tell any local
// user which paths exist inside directories they cannot read; checked as the submitter, a path
// they cannot reach looks exactly like one that does not exist.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/result.h"

namespace carma::exec {

struct UserIdentity {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;  // supplementary groups
};

// The user's supplementary groups (getgrouplist), `gid` included.
std::vector<gid_t> supplementary_groups(const std::string& user, gid_t gid);

struct PathCheck {
    bool workdir_ok = false;  // a directory the user may enter
    bool command_ok = false;  // one of the candidates is a regular file the user may execute
    bool env_bin_ok = false;  // the Python environment's bin directory may be entered (or none)
    bool script_ok = false;   // the script is a regular file the user may read (or none)
};

// Checks `workdir`, the `command_candidates` (absolute paths, tried in order) and a Python
// command's `script` (absolute; "" = none) as `who`: in a
// short-lived child process that takes the user's groups, gid and uid before it looks. When the
// daemon already runs as that uid, it looks itself. Fails only when the child cannot be made or
// cannot become the user.
Result<PathCheck> check_paths_as(const UserIdentity& who, const std::string& workdir,
                                 const std::vector<std::string>& command_candidates,
                                 const std::string& env_bin = "",
                                 const std::string& script = "");

// What a user may do with a directory a task's output files are to be created in.
enum class DirAccess {
    Writable = 0,   // a directory they may enter and create files in
    Missing = 1,    // it (or a directory on the way) does not exist
    NotADirectory = 2,
    NoAccess = 3,   // they may not reach it, or not write in it
};

// Looks at up to kMaxDirChecks directories as `who`, as check_paths_as does (a child that takes
// the user's identity, unless the daemon already runs as that uid); one answer per directory.
inline constexpr std::size_t kMaxDirChecks = 3;
Result<std::vector<DirAccess>> check_writable_dirs_as(const UserIdentity& who,
                                                      const std::vector<std::string>& dirs);

}  // namespace carma::exec
