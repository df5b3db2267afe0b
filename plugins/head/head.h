// defines: the head family's component infos (token embedding, LM head with cross-entropy)
#pragma once

#include "bench/bench.h"

namespace bench::head {

ComponentInfo token_embedding_info();
ComponentInfo lm_head_info();

}  // namespace bench::head
