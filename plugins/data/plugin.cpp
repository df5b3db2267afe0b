#include "data.h"

BENCH_PLUGIN("data", "1.0", "datasets: synthetic language, text bytes, llm.c token files") {
  registrar.add(bench::data::synthetic_info());
  registrar.add(bench::data::text_info());
  registrar.add(bench::data::tokens_info());
  registrar.set_default(bench::Slot::kDataset, "synthetic");
}
