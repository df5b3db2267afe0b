// `bench results` and `bench query`: reading the database (read-only).
#include <cstdio>

#include "cli/commands.h"
#include "cli/prepare.h"
#include "report/profile.h"
#include "report/report.h"
#include "store/store.h"

namespace bench::cli {

int cmd_results(const GlobalOptions& g, const RunChoice& run, const std::string& format, const ProfileChoice& profile) {
  try {
    const store::Store db(g.db, store::Store::Mode::kReadOnly);
    const int64_t id = report::select_run(db, run.run, run.experiment);
    const report::Format f = *report::parse_format(format);
    const std::string out = profile.show
                                ? report::render_profile(db, id, {profile.mode, profile.all ? 0 : profile.top}, f)
                                : report::render_results(db, id, f);
    std::fputs(out.c_str(), stdout);
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

int cmd_query(const GlobalOptions& g, const std::string& sql, const std::string& format) {
  try {
    const store::Store db(g.db, store::Store::Mode::kReadOnly);
    std::fputs(report::render(db.query(sql), *report::parse_format(format)).c_str(), stdout);
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
