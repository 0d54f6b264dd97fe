# Turns a GoogleTest binary's tests into CTest tests, a group per process (run after each build of
# the binary, as gtest_discover_tests is): `cmake -D BINARY=... -D BINARY_NAME=... -D TABLE=...
# -D OUT=... -P discover_groups.cmake`.
#
# Every test of the binary is matched against the rows of TABLE (tests/test_groups.cmake), the
# first row whose regular expression matches "Suite.Test" wins; a test no row matches stops the
# build, naming it, so that no test goes unlabelled or unrun. The tests a row takes from one suite
# run together in one process (the suite's fixtures are built once, LibTorch starts once), as one
# CTest test named after the suite; a row marked EACH makes a process (a CTest test) of each of its
# tests. Each CTest test gets the row's labels and timeout, and OUT.counts lists the tests of
# each CTest test ("<ctest name> <labels> <number of tests>"), for scripts/test_counts.
include(${TABLE})

execute_process(COMMAND ${BINARY} --gtest_list_tests OUTPUT_VARIABLE listing
                RESULT_VARIABLE status TIMEOUT 120)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${BINARY} --gtest_list_tests failed (${status}):\n${listing}")
endif()

# "Suite.\n  Test  # GetParam() = ...\n" -> Suite.Test, in the binary's order.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(tests "")
set(suite "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([A-Za-z0-9_/]+)\\.$")
    set(suite "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^  ([^ #]+)" AND NOT suite STREQUAL "")
    list(APPEND tests "${suite}.${CMAKE_MATCH_1}")
  endif()
endforeach()

list(LENGTH TRAINER_TEST_GROUPS row_fields)
math(EXPR last_row "${row_fields} / 4 - 1")
set(groups "")  # ctest names, in order of first appearance
foreach(test IN LISTS tests)
  set(row -1)
  foreach(i RANGE ${last_row})
    math(EXPR at "${i} * 4")
    list(GET TRAINER_TEST_GROUPS ${at} pattern)
    if(test MATCHES "${pattern}")
      set(row ${i})
      break()
    endif()
  endforeach()
  if(row EQUAL -1)
    message(FATAL_ERROR "${BINARY_NAME}: test ${test} is in no row of tests/test_groups.cmake: "
                        "add it to a row (its labels and timeout)")
  endif()
  math(EXPR at "${row} * 4 + 3")
  list(GET TRAINER_TEST_GROUPS ${at} kind)
  string(REGEX REPLACE "\\..*" "" test_suite "${test}")
  if(kind STREQUAL "EACH")
    set(name "${test}")
  else()
    set(name "${test_suite}")
  endif()
  # One suite split over rows: the later rows' groups are named after their first test.
  if(DEFINED group_row_${name} AND NOT group_row_${name} EQUAL row)
    set(name "${test}")
  endif()
  if(NOT DEFINED group_row_${name})
    set(group_row_${name} ${row})
    set(group_tests_${name} "")
    list(APPEND groups "${name}")
  endif()
  list(APPEND group_tests_${name} "${test}")
endforeach()

set(script "# Made by tests/discover_groups.cmake from ${BINARY_NAME}: do not edit.\n")
set(counts "")
foreach(name IN LISTS groups)
  math(EXPR at "${group_row_${name}} * 4 + 1")
  list(GET TRAINER_TEST_GROUPS ${at} labels)
  math(EXPR at "${group_row_${name}} * 4 + 2")
  list(GET TRAINER_TEST_GROUPS ${at} timeout)
  list(JOIN group_tests_${name} ":" filter)
  list(LENGTH group_tests_${name} n)
  string(REPLACE "|" ";" label_list "${labels}")
  string(APPEND script
         "add_test([=[${name}]=] [=[${BINARY}]=] [=[--gtest_filter=${filter}]=])\n"
         "set_tests_properties([=[${name}]=] PROPERTIES LABELS [=[${label_list}]=] "
         "TIMEOUT ${timeout} SKIP_REGULAR_EXPRESSION [=[\\[  SKIPPED \\] ${n} test]=])\n")
  string(APPEND counts "${name} ${labels} ${n}\n")
endforeach()
file(WRITE ${OUT} "${script}")
file(WRITE ${OUT}.counts "${counts}")
