# ctest runs each Catch2 test case by name (catch_discover_tests); a name containing ';' is
# split by CMake into a filter that matches nothing, and such a test would pass without running.
# (Catch2 v2 exits with the number of tests listed.)
execute_process(COMMAND "${EXE}" --list-test-names-only OUTPUT_VARIABLE names)
if(NOT names MATCHES "lexer:")
  message(FATAL_ERROR "${EXE} --list-test-names-only listed no tests")
endif()
string(ASCII 59 semicolon)
string(FIND "${names}" "${semicolon}" at)
if(NOT at EQUAL -1)
  message(FATAL_ERROR "a Catch2 test name contains ';' (ctest cannot select it by name):\n${names}")
endif()
