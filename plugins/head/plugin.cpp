#include "head.h"

BENCH_PLUGIN("head", "1.0", "token embedding, LM head and cross-entropy loss (with z-loss and output soft-capping)") {
  registrar.add(bench::head::token_embedding_info());
  registrar.add(bench::head::lm_head_info());
  registrar.set_default(bench::Slot::kEmbedding, "token");
  registrar.set_default(bench::Slot::kHead, "lm_head");
}
