# `carma serve --gpus nvml|dcgm` and `carma-fakejob --cuda` on a machine without the NVIDIA
# library each exit non-zero with one line naming the library (never a crash, never a silent
# fall-back to emulated GPUs). The library names are pointed at files that cannot exist, so the
# check holds on a machine that does have a driver.
set(state "${WORK}/no-nvidia-state")
file(REMOVE_RECURSE "${state}")

function(expect_one_line what library)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(STRIP "${err}${out}" text)
  # The daemon's first log line (stdout) says how tasks will be fenced (issue 41), before
  # anything can fail; besides it there must be the one line that says why.
  string(REGEX REPLACE "\\[[^]]*\\] \\[info\\] fences: [^\n]*" "" text "${text}")
  string(STRIP "${text}" text)
  if(rc EQUAL 0 OR rc GREATER 2)
    message(FATAL_ERROR "${what} should exit 1 or 2, got ${rc}: ${text}")
  endif()
  string(FIND "${text}" "\n" newline)
  if(NOT newline EQUAL -1)
    message(FATAL_ERROR "${what} should say one line, said: ${text}")
  endif()
  string(FIND "${text}" "${library}" named)
  if(named EQUAL -1)
    message(FATAL_ERROR "${what} should name ${library}: ${text}")
  endif()
endfunction()

expect_one_line("carma serve --gpus nvml" "libnvidia-ml-absent.so.1"
  ${CMAKE_COMMAND} -E env CARMA_NVML_LIBRARY=libnvidia-ml-absent.so.1
  ${CARMA} serve --gpus nvml --state-dir ${state})
expect_one_line("carma serve --gpus dcgm" "libdcgm-absent.so.4"
  ${CMAKE_COMMAND} -E env CARMA_DCGM_LIBRARY=libdcgm-absent.so.4
  ${CARMA} serve --gpus dcgm --state-dir ${state})
expect_one_line("carma-fakejob --cuda" "libcuda-absent.so.1"
  ${CMAKE_COMMAND} -E env CARMA_CUDA_LIBRARY=libcuda-absent.so.1
  ${FAKEJOB} --cuda --profile resnet3)
file(REMOVE_RECURSE "${state}")
