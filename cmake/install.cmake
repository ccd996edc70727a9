# `cmake --install`: the headers under include/rune (they include each other from the root, as
# "core/tensor.h"), the static libraries, the LLVM module librune_llvm.so (loaded with dlopen
# on the first compile: not linked), librune_cub.so where it was built, a CMake package
# exporting rune::rune (runeConfig.cmake, runeConfigVersion.cmake, runeTargets.cmake) and
# rune.pc for pkg-config. The libraries are static, so the package carries their private link
# dependencies: runeConfig.cmake finds nlohmann_json, ZLIB, Threads (and OpenMP where the host
# sorts use it) with find_dependency; LLVM is the module's alone. docs/packaging.md.
include(CMakePackageConfigHelpers)

set(RUNE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/rune)
set(rune_libraries rune rune_hip_check rune_gpu_check rune_codegen rune_lower rune_runtime
                   rune_ir)
install(TARGETS ${rune_libraries} EXPORT runeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rune)
install(EXPORT runeTargets NAMESPACE rune:: DESTINATION ${RUNE_INSTALL_CMAKEDIR})
# The LLVM module: found at <prefix>/lib once the build tree is gone (codegen/cpu/llvm_module.cpp).
install(TARGETS rune_llvm LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# rune::rune in a build tree that includes rune (FetchContent, add_subdirectory) too.
add_library(rune::rune ALIAS rune)

# The headers, with the .def tables they include (ir/ops.def, ir/env.def, ...).
foreach(dir ir runtime codegen core trace nn)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rune
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
endforeach()

# The CUB sort module (dlopened, not linked). OPTIONAL: a build of the libraries only (a
# subproject, `ninja rune`) has not built it; the runtime then sorts with the rank sort.
if(RUNE_CUB_MODULE)
  install(FILES ${RUNE_CUB_MODULE_FILE} DESTINATION ${CMAKE_INSTALL_LIBDIR} OPTIONAL)
endif()

set(RUNE_USES_OPENMP OFF)
get_target_property(codegen_links rune_codegen LINK_LIBRARIES)
if("OpenMP::OpenMP_CXX" IN_LIST codegen_links)
  set(RUNE_USES_OPENMP ON)
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/runeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/runeConfig.cmake INSTALL_DESTINATION ${RUNE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/runeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/runeConfig.cmake ${PROJECT_BINARY_DIR}/runeConfigVersion.cmake
        DESTINATION ${RUNE_INSTALL_CMAKEDIR})

# rune.pc: the static libraries in link order, then what they need (zlib, OpenMP, dl,
# pthread), all in Libs: a static library's dependencies are the consumer's to link.
# nlohmann_json is header-only: nothing to link; LLVM is linked by the module only.
set(RUNE_PC_LIBS "")
foreach(lib ${rune_libraries})
  string(APPEND RUNE_PC_LIBS " -l${lib}")
endforeach()
set(RUNE_PC_PRIVATE "-lz")
if(RUNE_USES_OPENMP)
  string(APPEND RUNE_PC_PRIVATE " ${OpenMP_CXX_FLAGS}")
endif()
string(APPEND RUNE_PC_PRIVATE " -ldl -pthread")
configure_file(${PROJECT_SOURCE_DIR}/cmake/rune.pc.in ${PROJECT_BINARY_DIR}/rune.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
