// defines: nothing — the umbrella header a plugin includes
#pragma once

#include "bench/component.h"
#include "bench/dtype.h"
#include "bench/error.h"
#include "bench/interfaces.h"
#include "bench/ops.h"
#include "bench/params.h"
#include "bench/plugin.h"
#include "bench/tensor.h"
#include "bench/value.h"
