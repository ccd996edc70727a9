# Builds tests/consumer against rune and runs it (ctest tests package.*, docs/packaging.md):
#   MODE=install    cmake --install the already-built tree RUNE_BUILD_DIR into WORK/prefix, then
#                   the consumer with find_package(rune CONFIG REQUIRED)
#   MODE=pkgconfig  the same install, then main.cpp compiled with `pkg-config --cflags --libs rune`
#   MODE=fetch      the consumer with FetchContent at RUNE_SOURCE (which builds the libraries)
# Prints how long each step took; fails unless the consumer prints EXPECTED.
set(EXPECTED "sum(x*x + 1) over arange(4): 18\n")
foreach(v MODE RUNE_BUILD_DIR RUNE_SOURCE WORK CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_package.cmake: -D${v}=... is required")
  endif()
endforeach()
set(consumer_src ${RUNE_SOURCE}/tests/consumer)
file(REMOVE_RECURSE ${WORK}/prefix ${WORK}/pkgconfig)
file(MAKE_DIRECTORY ${WORK})

function(step name)
  string(TIMESTAMP t0 "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t0}")
  message(STATUS "${name}: ${dt} s")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER} -DCMAKE_C_COMPILER_LAUNCHER=${LAUNCHER})
endif()

if(MODE STREQUAL "install" OR MODE STREQUAL "pkgconfig")
  step("cmake --install" ${CMAKE_COMMAND} --install ${RUNE_BUILD_DIR} --prefix ${WORK}/prefix)
  # The installed package must not point back at the source or build tree.
  file(GLOB_RECURSE package_files ${WORK}/prefix/lib/cmake/rune/*.cmake ${WORK}/prefix/lib/pkgconfig/rune.pc)
  foreach(f ${package_files})
    file(READ ${f} text)
    foreach(tree ${RUNE_SOURCE} ${RUNE_BUILD_DIR})
      string(FIND "${text}" "${tree}/" at)
      if(NOT at EQUAL -1)
        message(FATAL_ERROR "${f} refers to ${tree}")
      endif()
    endforeach()
  endforeach()
endif()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE ${WORK}/build)
  step("configure (find_package)" ${CMAKE_COMMAND} -S ${consumer_src} -B ${WORK}/build -G Ninja
       -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} ${launcher}
       -DRUNE_CONSUMER_MODE=find_package -DCMAKE_PREFIX_PATH=${WORK}/prefix)
  step("build" ${CMAKE_COMMAND} --build ${WORK}/build)
  set(exe ${WORK}/build/consumer)
elseif(MODE STREQUAL "pkgconfig")
  find_program(PKG_CONFIG pkg-config REQUIRED)
  set(ENV{PKG_CONFIG_PATH} ${WORK}/prefix/lib/pkgconfig)
  step("pkg-config" ${PKG_CONFIG} --cflags --libs rune)
  string(STRIP "${step_output}" flags)
  separate_arguments(flags UNIX_COMMAND "${flags}")
  file(MAKE_DIRECTORY ${WORK}/pkgconfig)
  set(exe ${WORK}/pkgconfig/consumer)
  step("compile and link (pkg-config)" ${LAUNCHER} ${CXX} -O1 ${consumer_src}/main.cpp -o ${exe} ${flags})
elseif(MODE STREQUAL "fetch")
  # Release, the libraries only (rune is not the top-level project: no tests, samples or
  # benchmarks; EXCLUDE_FROM_ALL: only what the consumer links).
  # The build directory is a sibling of RUNE_BUILD_DIR, at the same depth below the source tree:
  # ninja compiles from it, so ccache (CCACHE_BASEDIR at or above the source tree) sees the
  # same relative paths as in RUNE_BUILD_DIR and the libraries' objects hit. It is kept between
  # runs, so a rerun rebuilds only what changed.
  set(fetch_build ${RUNE_BUILD_DIR}-package-fetch)
  step("configure (FetchContent)" ${CMAKE_COMMAND} -S ${consumer_src} -B ${fetch_build} -G Ninja
       -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} ${launcher}
       -DRUNE_CONSUMER_MODE=fetch -DRUNE_SOURCE=${RUNE_SOURCE})
  step("build (rune's libraries and the consumer)" ${CMAKE_COMMAND} --build ${fetch_build} -j 2)
  set(exe ${fetch_build}/consumer)
else()
  message(FATAL_ERROR "check_package.cmake: MODE=${MODE}: expected install, pkgconfig or fetch")
endif()

step("run" ${exe})
if(NOT step_output STREQUAL EXPECTED)
  message(FATAL_ERROR "the consumer printed\n${step_output}\nexpected\n${EXPECTED}")
endif()
message(STATUS "the consumer printed: ${step_output}")
