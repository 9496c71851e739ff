#pragma once
// Who may share a GPU through MPS. NVIDIA's control daemon runs one MPS server at a time, as the
// user of its clients; a client of another user waits in CUDA initialisation until every client
// of the current server has exited (nvidia-cuda-mps-control(1)). CARMA runs one control daemon
// per GPU, so a task that would join a GPU's MPS clients of another user would sit there,
// counted as running and slowing nobody down, until they all end. The scheduler keeps it queued
// instead: an MPS GPU is shared only among one owner's tasks. Pure.

#include <string>

#include "core/policy.h"
#include "core/task.h"

namespace carma {

// True when `task` would be an MPS client of `gpu`'s control daemon while clients of another
// user run there.
bool mps_user_blocks(const TaskSpec& task, const GpuView& gpu);

// True when both will be MPS clients, of different users: they cannot share a GPU at once.
bool mps_users_differ(const TaskSpec& a, const TaskSpec& b);

// Why, for people: names the users and what would happen.
std::string explain_mps_user(const TaskSpec& task, const GpuView& gpu);

}  // namespace carma
