// defines: bench::result_json, result_from_json — a CaseResult as JSON text and back, every number
// with its bits (NaN and the infinities as strings): what a child process hands back, and the
// "result" of `bench run --jsonl`. Its keys and the order of each row's values are the columns of
// store/tables.h (a timed mode's samples after its peak_bytes: store::samples_position).
#pragma once

#include <string>

#include "store/record.h"

namespace bench {

/// The result as one line of JSON.
std::string result_json(const CaseResult& r);

/// The result of result_json. Throws bench::Error for text that is not one.
CaseResult result_from_json(const std::string& text);

}  // namespace bench
