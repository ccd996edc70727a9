# Compiles and runs the code blocks of docs/*.md, comparing their output with the `out` blocks.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
file(GLOB RUNE_DOC_PAGES ${CMAKE_CURRENT_SOURCE_DIR}/docs/*.md)
foreach(page ${RUNE_DOC_PAGES})
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${page})
  execute_process(
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/doc_blocks.py ${page} ${CMAKE_BINARY_DIR}/doc_blocks
    OUTPUT_VARIABLE blocks OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" blocks "${blocks}")
  foreach(block ${blocks})
    add_executable(doc_${block} ${CMAKE_BINARY_DIR}/doc_blocks/${block}.cpp)
    target_link_libraries(doc_${block} PRIVATE rune)
    rune_use_pch(doc_${block} program)  # tests/CMakeLists.txt
    # docs/distributed.md's blocks run on 2 MPI ranks (its examples print from rank 0 only),
    # with the fake CUDA driver's two devices and the fake NCCL (tests/distributed/fake_nccl.cpp)
    # for its GPU examples (each rank then has its own CUDA:0 and CUDA:1).
    set(launcher "")
    set(env "")
    if(page MATCHES "/distributed\\.md$")
      target_link_libraries(doc_${block} PRIVATE rune_distributed rune_test_fake_cuda)
      add_dependencies(doc_${block} fake_nccl)
      if(NOT MPI_C_FOUND)
        continue()
      endif()
      string(REPLACE ";" "|" launcher "${RUNE_MPIRUN}")
      set(env ${RUNE_MPI_ENV} RUNE_TEST_FAKE_CUDA=1 RUNE_TEST_FAKE_CUDA_DEVICES=2
              RUNE_NCCL_LIBRARY=$<TARGET_FILE:fake_nccl>)
    endif()
    add_test(NAME doc.${block}
      COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:doc_${block}> -DEXPECTED=${CMAKE_BINARY_DIR}/doc_blocks/${block}.expected
              "-DLAUNCHER=${launcher}" -P ${CMAKE_CURRENT_SOURCE_DIR}/tools/compare_output.cmake)
    rune_test_properties(TESTS doc.${block} LABELS docs ENV ${env})  # tests/CMakeLists.txt
  endforeach()
endforeach()
