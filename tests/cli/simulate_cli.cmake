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

# carma beside the paper's ten, warm history, per-task output and the fairness figures.
set(tasks_file "${CMAKE_CURRENT_BINARY_DIR}/simulate_cli_tasks.csv")
file(REMOVE "${tasks_file}")
execute_process(COMMAND ${CARMA} simulate --trace t1 --policy carma,all --history warm --json
                        --quiet --tasks "${tasks_file}"
                OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "carma simulate --history warm failed (${rc}): ${err}")
endif()
string(JSON n LENGTH "${out}" results)
string(JSON history GET "${out}" history)
string(JSON first GET "${out}" results 0 policy)
string(JSON last GET "${out}" results 10 policy)
if(NOT n EQUAL 11 OR NOT history STREQUAL "warm" OR NOT first STREQUAL "carma"
   OR NOT last STREQUAL "EST-LUG")
  message(FATAL_ERROR "expected carma + the ten paper policies, warm: ${n} ${history} ${first} ${last}")
endif()
# The warm history is another draw than the graded run's (issue 42): both seeds are said.
string(JSON seed GET "${out}" seed)
string(JSON history_seed GET "${out}" history_seed)
string(JSON compose GET "${out}" world_compose)
if(NOT seed EQUAL 1 OR NOT history_seed EQUAL 1001 OR NOT compose STREQUAL "model")
  message(FATAL_ERROR "expected seed 1, history_seed 1001, compose model: ${seed} ${history_seed} ${compose}")
endif()
string(JSON done GET "${out}" results 0 tasks_completed)
string(JSON oom GET "${out}" results 0 oom_crashes)
string(JSON max_wait GET "${out}" results 0 max_wait_s)
string(JSON p95_slowdown GET "${out}" results 0 p95_slowdown)
if(NOT done EQUAL 60 OR NOT oom EQUAL 0 OR max_wait LESS_EQUAL 0 OR p95_slowdown LESS 1)
  message(FATAL_ERROR "unexpected carma figures: ${done} ${oom} ${max_wait} ${p95_slowdown}")
endif()
file(STRINGS "${tasks_file}" lines)
list(LENGTH lines n_lines)
list(GET lines 0 header)
list(GET lines 1 row)
if(NOT n_lines EQUAL 661
   OR NOT header STREQUAL "policy,task,gpus,submit_s,wait_s,start_s,end_s,gpu_ids,attempts,oom_crashes,slowdown,outcome"
   OR NOT row MATCHES "^carma,Xception,1,0.0,[0-9.]+,[0-9.]+,[0-9.]+,[0-3],1,0,[0-9.]+,completed$")
  message(FATAL_ERROR "unexpected --tasks file (${n_lines} lines): ${header} / ${row}")
endif()

# Cold is the default; an unknown history mode or an unwritable tasks file fails with a message.
# Each compose rule is a world of its own, named in the JSON; an unknown one is refused.
foreach(compose pairwise bottleneck)
  execute_process(COMMAND ${CARMA} simulate --trace t1 --policy carma --world measured
                          --world-compose ${compose} --history warm --history-seed 7 --json --quiet
                  OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
  string(JSON said GET "${out}" world_compose)
  string(JSON history_seed GET "${out}" history_seed)
  string(JSON done GET "${out}" results 0 tasks_completed)
  if(NOT rc EQUAL 0 OR NOT said STREQUAL "${compose}" OR NOT history_seed EQUAL 7
     OR NOT done EQUAL 60)
    message(FATAL_ERROR "--world-compose ${compose} (${rc}): ${said} ${history_seed} ${done} ${err}")
  endif()
endforeach()

foreach(bad "--history;lukewarm" "--tasks;/nonexistent-dir/tasks.csv" "--world-compose;telepathy"
            "--history-seed;3"
            "--fair-share-half-life;0s" "--fair-share-half-life;soon"
            "--preempt-min-run;-5m" "--preempt-margin;-1")
  execute_process(COMMAND ${CARMA} simulate --trace t1 --policy carma ${bad} --quiet
                  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
  if(rc EQUAL 0 OR err STREQUAL "" OR rc GREATER 2)
    message(FATAL_ERROR "carma simulate ${bad} should fail with a message (${rc}): ${err}")
  endif()
endforeach()

# --report writes the page (charts over one shared time axis, the Gantt chart of attempts, the
# out-of-memory marks of OR-RR) and its two CSVs.
set(report_dir "${CMAKE_CURRENT_BINARY_DIR}/simulate_cli_report")
file(REMOVE_RECURSE "${report_dir}")
execute_process(COMMAND ${CARMA} simulate --trace mix-90 --policy exclusive,OR-RR --quiet
                        --report "${report_dir}"
                RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "carma simulate --report failed (${rc}): ${err}")
endif()
foreach(f index.html results.csv tasks.csv)
  if(NOT EXISTS "${report_dir}/${f}")
    message(FATAL_ERROR "carma simulate --report wrote no ${f}")
  endif()
endforeach()
file(READ "${report_dir}/index.html" html)
foreach(needle "<meta charset=\"utf-8\">" "class=\"timechart\"" "Attempts per GPU"
               "class=\"oom-mark\"" "Tasks waiting" "</html>")
  string(FIND "${html}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "carma simulate --report: index.html lacks ${needle}")
  endif()
endforeach()
