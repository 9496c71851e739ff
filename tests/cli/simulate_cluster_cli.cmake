# End-to-end check of cluster packing: `carma simulate --cluster NODES.csv --trace PODS.csv
# --protocol fgd --inflate 1.3 --seed 42 --policy fgd,bestfit,carma --json` prints the
# allocation ratio curve of each policy, on the openb-format slice of tests/sim/data; bad input
# fails with a message that names it.
set(data "${SOURCE}/tests/sim/data")
execute_process(COMMAND ${CARMA} simulate --cluster "${data}/openb_slice_nodes.csv"
                        --trace "${data}/openb_slice_pods.csv" --protocol fgd --inflate 1.3
                        --seed 42 --policy fgd,bestfit,carma --json
                OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "carma simulate --cluster failed (${rc}): ${err}")
endif()
string(JSON n LENGTH "${out}" policies)
string(JSON left_out GET "${out}" nodes_without_gpus_left_out)
string(JSON gpus GET "${out}" gpus)
if(NOT n EQUAL 3 OR NOT left_out EQUAL 1 OR NOT gpus EQUAL 38)
  message(FATAL_ERROR "expected 3 policies on 38 GPUs with one node left out: ${out}")
endif()
foreach(i RANGE 2)
  string(JSON name GET "${out}" policies ${i} policy)
  string(JSON at130 GET "${out}" policies ${i} allocation_ratio_at 130)
  string(JSON unallocated GET "${out}" policies ${i} gpus_unallocated)
  if(at130 LESS_EQUAL 0 OR at130 GREATER 100)
    message(FATAL_ERROR "${name}: allocation ratio at 130 % is ${at130}")
  endif()
endforeach()

# The table form names the policies and the two points of the curve people read.
execute_process(COMMAND ${CARMA} simulate --cluster "${data}/openb_slice_nodes.csv"
                        --trace "${data}/openb_slice_pods.csv" --policy all
                OUTPUT_VARIABLE table RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT table MATCHES "alloc@130" OR NOT table MATCHES "clustering")
  message(FATAL_ERROR "carma simulate --cluster --policy all: ${rc} ${err} ${table}")
endif()

set(bad_nodes "${WORK}/simulate_cluster_bad_nodes.csv")
file(WRITE "${bad_nodes}" "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,1024,8,\n")
foreach(case
    "--cluster;${bad_nodes};--trace;${data}/openb_slice_pods.csv|line 2"
    "--cluster;${data}/openb_slice_nodes.csv;--trace;${SOURCE}/data/traces/demo.csv|openb pod list"
    "--cluster;${data}/no-such.csv;--trace;${data}/openb_slice_pods.csv|cannot be read"
    "--cluster;${data}/openb_slice_nodes.csv;--trace;${data}/openb_slice_pods.csv;--policy;fdg|unknown cluster packing policy"
    "--cluster;${data}/openb_slice_nodes.csv;--trace;${data}/openb_slice_pods.csv;--protocol;fast|cluster protocols are fgd"
    "--cluster;${data}/openb_slice_nodes.csv;--trace;${data}/openb_slice_pods.csv;--inflate;-1|--inflate"
    "--protocol;fgd|add --cluster")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts -1 says)
  list(REMOVE_AT parts -1)
  execute_process(COMMAND ${CARMA} simulate ${parts} --quiet RESULT_VARIABLE rc ERROR_VARIABLE err
                  OUTPUT_QUIET)
  if(rc EQUAL 0 OR rc GREATER 2 OR NOT err MATCHES "${says}")
    message(FATAL_ERROR "carma simulate ${parts}: expected a failure saying '${says}', got ${rc}: ${err}")
  endif()
endforeach()
