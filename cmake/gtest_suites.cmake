# One ctest test per few GoogleTest suites (HTM_SUITES_PER_PROCESS, default 6: `A.*:B.*:...` in one
# process), not one per test or per suite: each process pays libtorch's start (~1 s of CPU, most
# of it the dynamic loader binding Debian's libtorch's 288 libraries), which per suite was a
# hundred seconds of the suite's time.
#
# htm_gtest_suites(TARGET LABEL FILTER [TIMEOUT S]) registers them after each build of TARGET:
# the suites that `TARGET --gtest_list_tests --gtest_filter=FILTER` lists, in their order, named as
# their suites joined by '+' (`MemoryEstimate+RunBoard+Watchdog`), OMP_NUM_THREADS=1; a group whose
# every test skipped itself (no GPU) is reported skipped: its output ends with the skipped tests'
# list, and nothing failed (ctest's skip expression wins over a failure, so "0 passed" alone also
# hid a group whose every test failed: a one-test group's failure). `ctest -R MemoryEstimate`
# runs the group with that suite; `build/tests/htm_tests --gtest_filter=Suite.*` one suite.
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
  set(suites "")
  foreach(line IN LISTS lines ITEMS "")  # the empty item last: the last group's end
    if(line MATCHES "^([^ #][^ ]*)\\.$")  # a suite line; its tests are indented under it
      list(APPEND suites "${CMAKE_MATCH_1}")
      list(LENGTH suites n)
      if(n LESS PER_PROCESS)
        continue()
      endif()
    elseif(NOT line STREQUAL "" OR NOT suites)
      continue()
    endif()
    list(JOIN suites "+" name)
    list(JOIN suites ".*:" filter)
    string(APPEND script "add_test([==[${name}]==] \"${EXE}\" [==[--gtest_filter=${filter}.*]==])\n"
           "set_tests_properties([==[${name}]==] PROPERTIES LABELS ${LABEL} TIMEOUT ${TIMEOUT}"
           " ENVIRONMENT OMP_NUM_THREADS=1 SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests\\.[\n]+"
           "\\[  SKIPPED \\] [0-9]+ tests?, listed below:([\n]+\\[  SKIPPED \\] [^\n]*)+[\n]*$]==])\n")
    set(suites "")
  endforeach()
  file(WRITE "${OUT}" "${script}")
  return()
endif()

set(HTM_GTEST_SUITES_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
set(HTM_SUITES_PER_PROCESS 6 CACHE STRING "GoogleTest suites run in one process, one ctest test (1: a test per suite)")
function(htm_gtest_suites target label filter)
  cmake_parse_arguments(ARG "" "TIMEOUT" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_${label}_suites.cmake)
  add_custom_command(TARGET ${target} POST_BUILD BYPRODUCTS ${out}
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${out} -DFILTER=${filter} -DLABEL=${label}
            -DTIMEOUT=${ARG_TIMEOUT} -DPER_PROCESS=${HTM_SUITES_PER_PROCESS} -P ${HTM_GTEST_SUITES_SCRIPT}
    VERBATIM)
  # ctest reads the file when it runs; before the first build it does not exist yet.
  set(include ${CMAKE_CURRENT_BINARY_DIR}/${target}_${label}_include.cmake)
  file(WRITE ${include} "if(EXISTS \"${out}\")\n  include(\"${out}\")\nelse()\n"
       "  add_test(${target}_${label}_NOT_BUILT ${target}_${label}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include})
endfunction()
