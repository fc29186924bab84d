# One ctest test per GoogleTest suite (`Suite.*` in one process), not one per test: each process
# pays libtorch's start (~0.75 s of CPU), which per test was a quarter of the unit label's time.
#
# htm_gtest_suites(TARGET LABEL FILTER [TIMEOUT S]) registers them after each build of TARGET:
# the suites that `TARGET --gtest_list_tests --gtest_filter=FILTER` lists, named as the suite
# (`MemoryEstimate`, `All/PolicyConformance`), each run with that filter, OMP_NUM_THREADS=1; a
# suite whose every test skipped itself (no GPU) is reported skipped: its output ends with the
# skipped tests' list, and nothing failed (ctest's skip expression wins over a failure, so "0
# passed" alone also hid a suite whose every test failed: a one-test suite's failure).
# `ctest -R MemoryEstimate` runs one; `build/tests/htm_tests --gtest_filter=Suite.Test` one test.
#
# Run as a script (cmake -P) after the build, it writes the ctest file ctest includes.
if(CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND "${EXE}" --gtest_list_tests "--gtest_filter=${FILTER}"
                  OUTPUT_VARIABLE listing RESULT_VARIABLE rc TIMEOUT 120)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}): ${listing}")
  endif()
  string(REPLACE "\n" ";" lines "${listing}")
  set(script "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ #][^ ]*)\\.$")  # a suite line; its tests are indented under it
      set(suite "${CMAKE_MATCH_1}")
      string(APPEND script "add_test([==[${suite}]==] \"${EXE}\" [==[--gtest_filter=${suite}.*]==])\n"
             "set_tests_properties([==[${suite}]==] PROPERTIES LABELS ${LABEL} TIMEOUT ${TIMEOUT}"
             " ENVIRONMENT OMP_NUM_THREADS=1 SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests\\.[\n]+"
             "\\[  SKIPPED \\] [0-9]+ tests?, listed below:([\n]+\\[  SKIPPED \\] [^\n]*)+[\n]*$]==])\n")
    endif()
  endforeach()
  file(WRITE "${OUT}" "${script}")
  return()
endif()

set(HTM_GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
function(htm_gtest_suites target label filter)
  cmake_parse_arguments(ARG "" "TIMEOUT" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_${label}_suites.cmake)
  add_custom_command(TARGET ${target} POST_BUILD BYPRODUCTS ${out}
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${out} -DFILTER=${filter} -DLABEL=${label}
            -DTIMEOUT=${ARG_TIMEOUT} -P ${HTM_GTEST_SUITES_SCRIPT}
    VERBATIM)
  # ctest reads the file when it runs; before the first build it does not exist yet.
  set(include ${CMAKE_CURRENT_BINARY_DIR}/${target}_${label}_include.cmake)
  file(WRITE ${include} "if(EXISTS \"${out}\")\n  include(\"${out}\")\nelse()\n"
       "  add_test(${target}_${label}_NOT_BUILT ${target}_${label}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include})
endfunction()
