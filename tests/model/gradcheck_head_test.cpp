// Whole-model float64 gradient checks of the head options: output-logit soft-capping alone,
// with tied embeddings and z-loss, and with a cap of 0.3 at which most logits of the tiny model
// (std about 0.85) saturate; z-loss with an untied head; the token embedding scaled by
// sqrt(d_model) (Gemma; untied, and tied, where the head reads the unscaled table) and by a
// multiplier. Every parameter against central differences of the objective.
#include <ostream>

#include "support/gradcheck.h"

namespace bench {
namespace gradcheck_head_test {
namespace {

struct GradCase {
  std::string name;
  friend void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }
  std::string model;  // extra [model] lines
};

class HeadGradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(HeadGradCheck, EveryParameterMatchesFiniteDifferences) { test::expect_gradients_match(GetParam().model); }

std::vector<GradCase> cases() {
  return {
      {"softcap", "head = { type = \"lm_head\", softcap = 2.0 }\n"},
      {"softcap_tied_zloss", "tie_embeddings = true\nhead = { type = \"lm_head\", softcap = 1.0, z_loss = 0.01 }\n"},
      {"softcap_saturating", "head = { type = \"lm_head\", softcap = 0.3 }\n"},
      {"zloss_untied", "head = { type = \"lm_head\", z_loss = 0.05 }\n"},
      {"embedding_sqrt_d_model", "embedding = { type = \"token\", scale = \"sqrt_d_model\" }\n"},
      {"embedding_sqrt_d_model_tied_softcap",
       "tie_embeddings = true\nembedding = { type = \"token\", scale = \"sqrt_d_model\" }\n"
       "head = { type = \"lm_head\", softcap = 2.0 }\n"},
      {"embedding_multiplier_tied",
       "tie_embeddings = true\nembedding = { type = \"token\", scale = \"sqrt_d_model\", multiplier = 0.3 }\n"},
  };
}

INSTANTIATE_TEST_SUITE_P(Head, HeadGradCheck, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace gradcheck_head_test
}  // namespace bench
