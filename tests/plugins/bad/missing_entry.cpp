// Passes the ABI check but has no registration function.
#include "bench/plugin.h"

extern "C" BENCH_EXPORT const char* bench_plugin_abi() { return BENCH_ABI_TAG; }
