// defines: bench::report::render_html — `bench report`: one run as one self-contained HTML page
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"

namespace bench::report {

/// The run as a single HTML document with inline CSS and inline SVG only (no scripts, no
/// network): throughput bars with error bars per mode; where the run has a profile, per profiled
/// mode a roofline of each case's slowest kernels and a bar per case of its step's time by slot
/// (report/profile.h); loss, grad-norm, max-attention-logit and z
/// curves per learning rate (log step axis); final loss against learning rate per variant when the
/// run has a learning-rate grid; the results tables; and the run's provenance (experiment text,
/// git sha, device, versions, plugins). Every plot is a <figure class="plot"> holding one
/// <svg class="chart">. Throws bench::Error when there is no run `run_id`.
std::string render_html(const store::Store& db, int64_t run_id);

}  // namespace bench::report
