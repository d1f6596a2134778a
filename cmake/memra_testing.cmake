# memra_add_test(name SOURCES... DEPS... [LABELS...]): a GoogleTest binary whose cases each become
# a CTest test (discovered when ctest runs, so building never runs test code). Label `asan` puts a
# test in the sanitizer run (scripts/test.sh builds target memra_asan_tests in the asan preset).
include(GoogleTest)
add_custom_target(memra_asan_tests)

function(memra_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  # The sanitizer build holds only the untrusted-input tests; skip the rest there.
  if(MEMRA_SANITIZE AND NOT "asan" IN_LIST ARG_LABELS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main memra_warnings)
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${ARG_LABELS}"
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    ENVIRONMENT "MEMRA_SOURCE_DIR=${PROJECT_SOURCE_DIR};MEMRA_BUILD_DIR=${PROJECT_BINARY_DIR}")
  if("asan" IN_LIST ARG_LABELS)
    add_dependencies(memra_asan_tests ${name})
  endif()
endfunction()
