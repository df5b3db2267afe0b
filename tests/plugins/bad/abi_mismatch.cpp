// Claims to be built against other headers: must be refused before anything else runs.
#include "bench/plugin.h"

extern "C" BENCH_EXPORT const char* bench_plugin_abi() { return "bench-abi-0/GNU-4.8.5/0000000000000000"; }
extern "C" BENCH_EXPORT int bench_plugin_register(bench::Registrar*, char*, size_t) {
  __builtin_trap();  // never reached: the loader stops at the tag
}
