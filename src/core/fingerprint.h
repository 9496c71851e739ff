#pragma once
// Which earlier runs count as "the same task" for history (core/knowledge.h). Two keys:
//   exact:  the owner, the exact argv and the GPU count: the same command line run again;
//   family: the owner, the program, the script and the GPU count: the same training code with
//           other arguments (another learning rate, batch size or epoch count). A run on one GPU
//           says little about what the same code holds per GPU on four, so the count is part.
// The program is the basename of argv[0] (after a leading `env [VAR=value...]`), with python3,
// python3.11 and python counted as one program; a shell's `-c 'LINE'` is looked through to the
// command in LINE. The script is the first argument that names a script file (*.py, *.sh; an
// argv[0] that is itself one), or `-m MODULE`; a program run without one (a compiled trainer,
// `python -c`) makes the family the owner and the program. carma-fakejob's script is its
// profile (`--profile NAME`): each profile is another workload.
// Each key is a canonical text (canonical_exact / canonical_family: length-prefixed fields, so no
// two different inputs share one) hashed with 64-bit FNV-1a and written as 16 lower-case hex
// digits; the store keeps the hex, which reveals nothing of the command. The variables the
// submitter set on purpose (--env, a task file's env:) are part of the exact key; the exported
// rest of the environment and the working directory are part of neither.
// Pure: no I/O.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace carma {

// FNV-1a, 64 bit (offset basis 14695981039346656037, prime 1099511628211).
std::uint64_t fnv1a64(std::string_view bytes);

struct CommandFamily {
    std::string program;  // "python", "torchrun", "carma-fakejob"
    std::string script;   // "train.py", "-m pkg.train", or empty
};

CommandFamily command_family(const std::vector<std::string>& argv);

// `env_key`: the explicit environment's key (env_key below); "" adds nothing, so the keys of
// runs without one are what they were before it counted.
std::string canonical_exact(std::uint64_t owner, const std::vector<std::string>& argv, int gpus,
                            std::string_view env_key = {});
std::string canonical_family(std::uint64_t owner, const CommandFamily& family, int gpus);

struct TaskFingerprint {
    std::string exact;   // 16 hex digits
    std::string family;  // 16 hex digits
};

TaskFingerprint fingerprint_task(std::uint64_t owner, const std::vector<std::string>& argv,
                                 int gpus, std::string_view env_key = {});

// The variables a run was given on purpose (`--env EPOCHS=90`), as one key of 16 hex digits:
// in name order, so the order they were given in does not matter; "" for none. They change what
// the same command does, so they are part of the exact key (not of the family: the same code).
std::string env_key(std::vector<std::pair<std::string, std::string>> vars);

}  // namespace carma
