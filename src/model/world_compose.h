#pragma once
// The bottleneck world (model/world.h, compose bottleneck): collocated tasks share the GPU's
// contended resources, and the most contended one a task relies on sets its pace. It shares
// nothing with the device model's task_speed (model/interference.h): no utilisation knee, no
// fitted constants; only the tasks' solo profiles.
//
// Resources r: SM activity (smact), SM occupancy (smocc) and DRAM bandwidth (drama), each a
// fraction of the GPU, so each has capacity 1. A task's demand d_ir is its solo value (clamped to
// [0, 1]); a task with no profiled activity at all (smact = smocc = drama = 0) demands its solo
// utilisation of SM activity. Load L_r = sum_i d_ir.
//
// A resource with L_r <= 1 slows no one. An oversubscribed one is shared max-min fairly (water
// filling), as round-robin hardware arbiters (warp schedulers, the memory controller) serve their
// requesters: every task gets min(d_ir, lambda_r), the level lambda_r chosen so the shares add up
// to the capacity, sum_i min(d_ir, lambda_r) = 1. Its speed on r is the share of its demand it
// gets, min(1, lambda_r / d_ir): tasks relying on r more than the fair level slow in proportion
// to how much more, and a light user is not slowed (no jump from speed 1 at demand 0 to 1/L_r at
// a tiny demand). Equal demands give 1 / L_r each.
//
// speed_i = clamp(min over r with d_ir > 0 of min(1, lambda_r / d_ir), 0.05, 1).
//
// One pass: a task slowed by one resource is not credited with using less of the others, so a
// task bound on two resources is slightly pessimistic. Memory capacity is not a resource here: a
// GPU whose residents outgrow it crashes one (model/memory.h), it does not slow them.

#include <span>

#include "model/world.h"

namespace carma::model {

// The speeds of the GPU-active tasks of one GPU, in order; `out` as long as `tasks`.
void bottleneck_speeds(std::span<const WorldTask> tasks, std::span<double> out);

}  // namespace carma::model
