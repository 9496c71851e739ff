# `carma serve --gpus auto` with a broken NVML named in CARMA_NVML_LIBRARY (the fake NVML playing
# a driver/library version mismatch, as after a driver update until the reboot) refuses to start:
# exit 1, one line with NVML's error and what to do. Before, it fell back to emulated GPUs.
set(state "${WORK}/broken-nvml-state")
file(REMOVE_RECURSE "${state}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env CARMA_NVML_LIBRARY=${FAKE_NVML} FAKE_NVML_FAIL_INIT=rm-mismatch
          CARMA_DCGM_LIBRARY=libdcgm-absent.so.4
          ${CARMA} serve --gpus auto --state-dir ${state} --socket ${state}/carma.sock
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
string(STRIP "${err}${out}" text)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "carma serve --gpus auto should refuse to start (exit 1), got ${rc}: ${text}")
endif()
foreach(needed "Driver/library version mismatch" "reboot" "CARMA_NVML_LIBRARY")
  string(FIND "${text}" "${needed}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "carma serve --gpus auto should say '${needed}': ${text}")
  endif()
endforeach()
string(FIND "${text}" "emulated:4x" emulated)
if(NOT emulated EQUAL -1)
  message(FATAL_ERROR "carma serve --gpus auto must not choose emulated GPUs: ${text}")
endif()
file(REMOVE_RECURSE "${state}")
