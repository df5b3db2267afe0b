# defines: bench_add_grouped_gtest(TARGET) -- CTest tests for a GoogleTest binary, one per group of
# cases that share a test and an execution target, instead of one process per case.
#
# kernels_test has ~1,500 cases, most of them one value-parameterized test run on three targets
# (cases named Suite.Test/<shape>_<cpu|emulated|guarded|cuda>). Started one process each, the
# starts alone cost about as much as the cases under ASan (0.2 s each: the instrumented libraries
# load). Here the cases of Suite.Test on one target form one CTest test, run with the GoogleTest
# filter "Suite.Test/*_<target>"; every other case (not parameterized by target) stays a test of
# its own. The names keep the target last, so `ctest -R _guarded` and the sanitizer script's
# exclusions select them as before; GoogleTest's output inside a group names each failing case.
#
# The list is read from the binary after each build (as gtest_discover_tests does), written to a
# file that CTest includes.

set(_BENCH_GROUPED_GTEST_SCRIPT "${CMAKE_CURRENT_LIST_FILE}")

function(bench_add_grouped_gtest target)
  set(_out "${CMAKE_CURRENT_BINARY_DIR}/${target}_groups.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -D "EXE=$<TARGET_FILE:${target}>" -D "OUT=${_out}"
            -D "ENVIRONMENT=OMP_WAIT_POLICY=PASSIVE" -P "${_BENCH_GROUPED_GTEST_SCRIPT}"
    VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_out}")
endfunction()

if(CMAKE_SCRIPT_MODE_FILE)  # the POST_BUILD step: list, group, write
  cmake_policy(VERSION 3.25)
  execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE _list RESULT_VARIABLE _rc
                  ERROR_VARIABLE _err TIMEOUT 60)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${_rc}): ${_err}")
  endif()
  string(REGEX REPLACE "  #[^\n]*" "" _list "${_list}")  # "# GetParam() = ..." comments
  string(REPLACE ";" "" _list "${_list}")
  string(REPLACE "\n" ";" _lines "${_list}")
  set(_groups "")
  set(_suite "")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^([^ ].*)\\.$")
      set(_suite "${CMAKE_MATCH_1}")
    elseif(_line MATCHES "^  ([^ ]+)$")
      set(_name "${_suite}.${CMAKE_MATCH_1}")
      if(_name MATCHES "(^|[./])DISABLED_")  # run only on request, by the binary itself
        continue()
      endif()
      if(_name MATCHES "^(.*)/[^/]*_(cpu|emulated|guarded|cuda)$")
        set(_name "${CMAKE_MATCH_1}/*_${CMAKE_MATCH_2}")
      endif()
      if(NOT _name IN_LIST _groups)
        list(APPEND _groups "${_name}")
      endif()
    endif()
  endforeach()
  set(_text "# written by tests/support/GroupedGTest.cmake from ${EXE} --gtest_list_tests\n")
  foreach(_g IN LISTS _groups)
    string(APPEND _text "add_test([==[${_g}]==] [==[${EXE}]==] [==[--gtest_filter=${_g}]==])\n"
           "set_tests_properties([==[${_g}]==] PROPERTIES TIMEOUT 600 ENVIRONMENT [==[${ENVIRONMENT}]==])\n")
  endforeach()
  file(WRITE "${OUT}.new" "${_text}")
  file(RENAME "${OUT}.new" "${OUT}")
endif()
