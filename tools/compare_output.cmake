# Runs EXE and fails unless its standard output equals the file EXPECTED exactly.
# Optional: STDERR_REQUIRE / STDERR_REJECT, regular expressions its standard error must match /
# must not match (e.g. with DEBUG=2, that kernels ran on CUDA:0 and none on the host).
# Optional LAUNCHER: a command put before EXE, its words separated by | (e.g. mpirun|-np|2).
string(REPLACE "|" ";" launcher "${LAUNCHER}")
execute_process(COMMAND ${launcher} ${EXE} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
file(READ ${EXPECTED} expected)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} exited with ${rc}; output:\n${out}\nstandard error:\n${err}")
endif()
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "${EXE} printed:\n${out}\nexpected:\n${expected}")
endif()
if(DEFINED STDERR_REQUIRE AND NOT err MATCHES "${STDERR_REQUIRE}")
  message(FATAL_ERROR "${EXE}: standard error does not match \"${STDERR_REQUIRE}\":\n${err}")
endif()
if(DEFINED STDERR_REJECT AND err MATCHES "${STDERR_REJECT}")
  message(FATAL_ERROR "${EXE}: standard error matches \"${STDERR_REJECT}\" (${CMAKE_MATCH_0}):\n${err}")
endif()
