# The plugin API's header set: what BENCH_ABI_TAG hashes (cmake/BenchAbi.cmake) and what
# `cmake --install` ships to plugin authors. Every public header of harness/include/bench and
# kernels/ (the launchers, the tile verbs and executors, tile/cuda_executor.cuh for a plugin's
# CUDA pass), except the internals listed here, which plugins never include.
# Usable in script mode: tests/scripts/abi_tag_test.sh runs cmake/BenchAbiDigest.cmake.
set(BENCH_INTERNAL_HEADERS
    harness/include/bench/build_info.h  # the harness's provenance (libbench, not the API)
    kernels/caching_allocator.h         # device memory behind kernels/memory.h
    kernels/cuda_backend.h              # what libbench_cuda installs
    kernels/cuda_launchers.h            # the hand-written CUDA entry points
    kernels/device_runtime.h            # the CUDA runtime pieces the harness measures with
    kernels/memory.h)                   # where a model's tensors live (plugins use bench::ops)

# bench_api_headers(<out-var> <source-dir>): the API headers, relative to <source-dir>, sorted.
function(bench_api_headers out source_dir)
  file(GLOB_RECURSE _h RELATIVE "${source_dir}" "${source_dir}/harness/include/bench/*.h" "${source_dir}/kernels/*.h"
       "${source_dir}/kernels/tile/*.cuh")
  list(REMOVE_ITEM _h ${BENCH_INTERNAL_HEADERS})
  list(SORT _h)
  set(${out} ${_h} PARENT_SCOPE)
endfunction()

# bench_api_digest(<out-var> <source-dir>): 16 hex digits of SHA-256 over each API header's
# relative path and SHA-256, in order.
function(bench_api_digest out source_dir)
  bench_api_headers(_headers "${source_dir}")
  set(_input "")
  foreach(_rel IN LISTS _headers)
    file(SHA256 "${source_dir}/${_rel}" _sum)
    string(APPEND _input "${_rel}:${_sum};")
  endforeach()
  string(SHA256 _digest "${_input}")
  string(SUBSTRING "${_digest}" 0 16 _digest)
  set(${out} ${_digest} PARENT_SCOPE)
endfunction()
