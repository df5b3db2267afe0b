// `bench report [RUN] [-o FILE]`: one run as a self-contained HTML page with plots.
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "cli/prepare.h"
#include "report/html.h"
#include "report/report.h"
#include "store/store.h"

namespace bench::cli {

int cmd_report(const GlobalOptions& g, const ReportArgs& o) {
  try {
    const store::Store db(g.db, store::Store::Mode::kReadOnly);
    const int64_t id = report::select_run(db, o.run.run, o.run.experiment);
    std::string path = o.output;
    if (path.empty())  // next to the database: results/report-3.html for results/bench.db
      path = (std::filesystem::path(g.db).parent_path() / ("report-" + std::to_string(id) + ".html")).string();
    write_output(path, report::render_html(db, id));
    if (!g.quiet && path != "-")
      std::fprintf(stderr, "wrote the report of run %lld to %s\n", static_cast<long long>(id), path.c_str());
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
