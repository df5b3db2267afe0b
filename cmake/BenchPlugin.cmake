# bench_add_plugin(<name> SOURCES <files...> [OUTPUT_DIRECTORY <dir>])
#
# Builds a plugin shared library `bench_<name>` linked against the harness library. In the bench
# tree it lands in the build's plugin directory; out of tree (find_package(bench)) in
# OUTPUT_DIRECTORY or the current binary directory, to be named in an experiment's plugin_paths.
function(bench_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  set(target "bench_${name}")
  add_library(${target} MODULE ${ARG_SOURCES})
  if(TARGET bench_core)
    target_link_libraries(${target} PRIVATE bench_core bench_warnings)
  else()
    target_link_libraries(${target} PRIVATE bench::bench_core)
  endif()
  set_target_properties(${target} PROPERTIES PREFIX "lib" CXX_VISIBILITY_PRESET hidden
                                             VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED BENCH_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${BENCH_PLUGIN_OUTPUT_DIR}"
                                               INSTALL_RPATH "$ORIGIN/../..")
    install(TARGETS ${target} LIBRARY DESTINATION ${BENCH_PLUGIN_SUBDIR})
  else()
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
endfunction()
