# cmake -DSOURCE_DIR=<tree> -P cmake/BenchAbiDigest.cmake: prints the digest of <tree>'s plugin
# API headers, as BENCH_ABI_TAG carries it (tests/scripts/abi_tag_test.sh).
include("${CMAKE_CURRENT_LIST_DIR}/BenchApiHeaders.cmake")
bench_api_digest(_digest "${SOURCE_DIR}")
message("${_digest}")
