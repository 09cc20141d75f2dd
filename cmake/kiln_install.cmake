# `cmake --install BUILD --prefix P`: kiln as a library for other CMake projects.
#
#   P/include/kiln/{ir,passes,codegen,runtime,backend,frontend}/...   the headers, in the
#       repository's layout (they include each other as "ir/graph.h"), so users write
#       #include "frontend/kiln.h"
#   P/lib/libkiln_*.a                                                  the static libraries
#   P/lib/cmake/kiln/kilnConfig.cmake, ...Version.cmake, ...Targets.cmake
#   P/bin/kiln                                                         the command-line program
#
# A user's project: find_package(kiln REQUIRED) and target_link_libraries(app PRIVATE kiln::kiln).
# kiln::kiln brings every library in link order, their dependencies, the include folder, C++20
# and KILN_HAVE_CUDA where kiln was built with CUDA. Included last by the top-level CMakeLists.txt,
# once every library exists; the libraries' folders only keep their build-tree paths and
# build-time targets out of the export ($<BUILD_INTERFACE:...>, ir/ and runtime/).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# The libraries, each before those it uses (the order a static link needs); the runtime is
# one library with or without LLVM and CUDA.
set(KILN_LIBRARIES kiln_onnx kiln_frontend kiln_backend kiln_codegen kiln_runtime kiln_passes kiln_ir)
foreach(lib IN LISTS KILN_LIBRARIES)
  if(NOT TARGET ${lib})
    message(FATAL_ERROR "kiln install: no target ${lib}")
  endif()
  # Exported as kiln::ir, kiln::passes, ... for users who want a part only.
  string(REGEX REPLACE "^kiln_" "" export_name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
endforeach()

# The one target users link: kiln::kiln. (Not named `kiln` here: that is the program.)
# The examples link kiln::kiln in this tree too, through the alias.
add_library(kiln_all INTERFACE)
target_link_libraries(kiln_all INTERFACE ${KILN_LIBRARIES})
set_target_properties(kiln_all PROPERTIES EXPORT_NAME kiln)
add_library(kiln::kiln ALIAS kiln_all)

install(TARGETS ${KILN_LIBRARIES} kiln_all
  EXPORT kilnTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${KILN_INSTALL_INCLUDEDIR})
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Every header and X-macro table of the library folders (new files and folders included
# without a change here). tools/, tests/ and bench/ are not part of the library.
install(DIRECTORY ir passes codegen runtime backend frontend
  DESTINATION ${KILN_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def")

install(EXPORT kilnTargets
  NAMESPACE kiln::
  DESTINATION ${KILN_INSTALL_CMAKEDIR})

# fmt as this build has it: a package (found again by the user's project) or headers only.
if(fmt_FOUND)
  set(KILN_CONFIG_FMT_HEADER_ONLY_DIR "")
else()
  set(KILN_CONFIG_FMT_HEADER_ONLY_DIR "${KILN_FMT_INCLUDE}")
endif()
configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/kilnConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/kilnConfig.cmake
  INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR}
  PATH_VARS KILN_INSTALL_INCLUDEDIR)
# 0.x: a minor version may break the API, so only the same minor version is compatible.
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/cmake/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${CMAKE_BINARY_DIR}/cmake/kilnConfig.cmake
  ${CMAKE_BINARY_DIR}/cmake/kilnConfigVersion.cmake
  DESTINATION ${KILN_INSTALL_CMAKEDIR})
