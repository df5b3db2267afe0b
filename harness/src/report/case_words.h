// defines: bench::report::label_tokens — the words of a case's label, by which compare selects
// cases and the HTML report groups them. Private to report/.
#pragma once

#include <string>
#include <vector>

#include "store/run_data.h"

namespace bench::report {

/// The words of a case's label: the variant name (as one word, even with spaces) and each
/// "key=value" of its swept axes. "base" has none.
std::vector<std::string> label_tokens(const CaseRow& c);

}  // namespace bench::report
