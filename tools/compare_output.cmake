# Runs EXE and fails unless its standard output equals the file EXPECTED exactly.
execute_process(COMMAND ${EXE} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
file(READ ${EXPECTED} expected)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} exited with ${rc}; output:\n${out}")
endif()
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "${EXE} printed:\n${out}\nexpected:\n${expected}")
endif()
