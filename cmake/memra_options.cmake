# Compiler flags for memra's own targets: warnings as errors on our code, sanitizers on request.
# Third-party headers come in as SYSTEM includes so their warnings do not break our build.

add_library(memra_warnings INTERFACE)
target_compile_options(memra_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wno-missing-field-initializers>)

if(MEMRA_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()

# The CPU backend is the serving path on machines without a GPU: let it use the host's SIMD. A
# build carried to another machine (the `device` preset) names a portable level instead.
set(MEMRA_MARCH "native" CACHE STRING "-march for CPU code in Release builds (native, x86-64-v3)")
if(CMAKE_BUILD_TYPE STREQUAL "Release" AND NOT MEMRA_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=${MEMRA_MARCH}>)
endif()

# memra_add_library(name SOURCES... DEPS...): a static library for one source folder.
function(memra_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE memra_warnings)
endfunction()

# memra_add_folder_library(name DEPS...): a static library of every .cpp under the calling folder
# (recursively). Nothing is defined while the folder has no sources yet, so the tree configures
# at every step of its growth.
function(memra_add_folder_library name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(sources)
    memra_add_library(${name} SOURCES ${sources} DEPS ${ARG_DEPS})
  endif()
endfunction()
