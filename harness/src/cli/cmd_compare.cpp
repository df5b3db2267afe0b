// `bench compare A B`: B against the baseline A, with a verdict per metric (docs/results.md).
#include <cstdio>

#include "cli/commands.h"
#include "cli/prepare.h"
#include "report/compare.h"
#include "store/store.h"

namespace bench::cli {

int cmd_compare(const GlobalOptions& g, const CompareArgs& o) {
  try {
    const store::Store db(g.db, store::Store::Mode::kReadOnly);
    report::CompareOptions opt;
    opt.run = o.run;
    opt.a = o.a;
    opt.b = o.b;
    opt.metrics = o.metrics;
    opt.alpha = o.alpha;
    opt.min_effect = o.min_effect;
    const report::CompareReport r = report::compare(db, opt);
    std::fputs(report::render_compare(r, *report::parse_format(o.format)).c_str(), stdout);
    return o.fail_if_regression && r.regressions > 0 ? kFailed : kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
