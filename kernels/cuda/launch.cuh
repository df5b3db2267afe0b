// defines: bench::kernels::cuda — the CUDA launchers' shared declarations
//
// CUDA launchers mirror the host launchers of kernels/*.h with a stream instead of an Exec and
// run the very same tile programs through tile/cuda_executor.cuh; kernels/cuda_launchers.h
// declares them for the host launchers.
#pragma once

#include <cuda_runtime.h>

#include "../cuda_launchers.h"
#include "../tile/cuda_executor.cuh"
