// `bench export [RUN]`: a run as one long table (CSV) or JSON, for pandas and spreadsheets.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "bench/error.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "report/export.h"
#include "store/store.h"

namespace bench::cli {

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw Error("cannot write " + path);
}

int cmd_export(const GlobalOptions& g, const ExportArgs& o) {
  try {
    const store::Store db(g.db, store::Store::Mode::kReadOnly);
    const int64_t id = report::select_run(db, o.run.run, o.run.experiment);
    write_output(o.output, report::render_export(db, id, *report::parse_format(o.format)));
    if (!g.quiet && !o.output.empty() && o.output != "-")
      std::fprintf(stderr, "wrote run %lld to %s\n", static_cast<long long>(id), o.output.c_str());
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
