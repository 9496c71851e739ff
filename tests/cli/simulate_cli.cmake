# End-to-end check of the command: `carma simulate --trace t1 --policy exclusive,oracle-MAGM
# --json` prints the promised JSON, and bad input fails with a message, not a crash.
execute_process(COMMAND ${CARMA} simulate --trace t1 --policy exclusive,oracle-MAGM --json --quiet
                OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "carma simulate failed (${rc}): ${err}")
endif()
string(JSON n LENGTH "${out}" results)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected 2 results, got ${n}: ${out}")
endif()
string(JSON policy GET "${out}" results 1 policy)
string(JSON done GET "${out}" results 1 tasks_completed)
if(NOT policy STREQUAL "oracle-MAGM" OR NOT done EQUAL 60)
  message(FATAL_ERROR "unexpected result: ${policy} ${done}")
endif()

foreach(bad "--policy;nonsense" "--trace;no-such-file.csv" "--gpus;4xB900" "--sharing;telepathy")
  execute_process(COMMAND ${CARMA} simulate ${bad} --quiet RESULT_VARIABLE rc ERROR_VARIABLE err
                  OUTPUT_QUIET)
  if(rc EQUAL 0 OR err STREQUAL "")
    message(FATAL_ERROR "carma simulate ${bad} should fail with a message")
  endif()
  if(rc GREATER 2)
    message(FATAL_ERROR "carma simulate ${bad} crashed (${rc}): ${err}")
  endif()
endforeach()
