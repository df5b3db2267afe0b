// Whole-model float64 gradient checks of the position family: the absolute encodings (the
// learned table's gradient is the sum over the batch of the embedding gradient at its position)
// and RoPE with every scaling in both pair layouts, on whole heads and on part of each head
// (rotary_fraction). The tiny model runs at seq_len 6 with original_max_position 3, so each
// scaling is active (and YaRN and LongRoPE scale the logits).
#include <ostream>

#include "support/gradcheck.h"

namespace bench {
namespace gradcheck_position_test {
namespace {

struct PositionGradCase {
  std::string name;
  friend void PrintTo(const PositionGradCase& c, std::ostream* os) { *os << c.name; }
  std::string model;  // extra [model] lines
};

class PositionGradCheck : public ::testing::TestWithParam<PositionGradCase> {};

TEST_P(PositionGradCheck, EveryParameterMatchesFiniteDifferences) { test::expect_gradients_match(GetParam().model); }

std::vector<PositionGradCase> cases() {
  std::vector<PositionGradCase> out;
  out.push_back({"sinusoidal", "position = \"sinusoidal\"\n"});
  out.push_back({"sinusoidal_scaled_odd_width", "d_model = 10\nposition = { type = \"sinusoidal\", scale = 0.3 }\n"});
  out.push_back({"learned", "position = \"learned\"\n"});
  out.push_back({"learned_tied_post",
                 "position = { type = \"learned\", init_std = 0.5 }\ntie_embeddings = true\n"
                 "norm_position = \"post\"\n"});
  const std::vector<std::pair<std::string, std::string>> scalings = {
      {"none", ""},
      {"linear", ", scaling = \"linear\", factor = 2.5, original_max_position = 3"},
      {"ntk", ", scaling = \"ntk\", factor = 4, original_max_position = 3"},
      {"dynamic_ntk", ", scaling = \"dynamic_ntk\", factor = 2, original_max_position = 3"},
      {"yarn", ", scaling = \"yarn\", factor = 8, original_max_position = 3, beta_fast = 2.0, beta_slow = 0.1"},
      {"llama3", ", scaling = \"llama3\", factor = 8, original_max_position = 3, base = 10.0"},
      {"longrope",
       ", scaling = \"longrope\", factor = 4, original_max_position = 3, "
       "long_factors = [1.0, 1.5, 3.0, 4.0]"},
  };
  for (const char* layout : {"half", "interleaved"})
    for (const auto& [name, keys] : scalings)
      out.push_back(
          {std::string("rope_") + name + "_" + layout,
           "d_model = 16\nposition = { type = \"rope\", layout = \"" + std::string(layout) + "\"" + keys + " }\n"});
  // Partial rotary: heads of 16, the first 4 (a quarter, GPT-NeoX) or 8 features rotated; the
  // LongRoPE factors then number 4 / 2.
  for (const char* layout : {"half", "interleaved"}) {
    const std::string head = "d_model = 32\nposition = { type = \"rope\", layout = \"" + std::string(layout) + "\"";
    out.push_back({std::string("rope_partial_quarter_") + layout, head + ", rotary_fraction = 0.25 }\n"});
    out.push_back({std::string("rope_partial_half_yarn_") + layout,
                   head + ", rotary_fraction = 0.5, scaling = \"yarn\", factor = 8, original_max_position = 3, "
                          "beta_fast = 2.0, beta_slow = 0.1 }\n"});
    out.push_back({std::string("rope_partial_quarter_longrope_") + layout,
                   head + ", rotary_fraction = 0.25, scaling = \"longrope\", factor = 4, original_max_position = 3, "
                          "long_factors = [1.0, 3.0] }\n"});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Position, PositionGradCheck, ::testing::ValuesIn(cases()),
                         [](const auto& tp) { return tp.param.name; });

}  // namespace
}  // namespace gradcheck_position_test
}  // namespace bench
