#pragma once
// Private to src/device/: the emulator file's format as it lies on disk (emulator_layout.cpp):
// what an existing file holds, judged without mapping it, and the header fields a backend writes.
// The structs themselves are in emulator_file.h; opening and attaching is emulator_file.cpp's.

#include <string>

#include "core/result.h"
#include "device/emulated.h"
#include "device/emulator_file.h"

namespace carma::device::emu {

enum class Layout { Empty, Foreign, OtherVersion, Damaged, Ours };

struct Inspection {
    Layout layout = Layout::Empty;
    std::string detail;  // what is wrong with it, for messages ("" when Ours)
};

// What a header of our layout says that cannot be right (a damaged file), or "".
std::string header_problem(const Header& h);
Result<Inspection> inspect(int fd, const std::string& path);

// Options that a header can hold (a GPU count and type name that fit), with a path to write.
Result<void> validate_options(const EmulatorOptions& o);
void write_world(Header& h, const EmulatorOptions& o);
void write_gpu_set(Header& h, const EmulatorOptions& o);
bool same_gpu_set(const Header& h, const EmulatorOptions& o);
// Zeroed GPUs and slots; energy counts from now.
void clear_gpus_and_slots(State& s);

}  // namespace carma::device::emu
