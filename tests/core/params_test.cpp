// Parameter specs and values: type checks, bounds, defaults, did-you-mean, JSON.
#include "bench/params.h"

#include <gtest/gtest.h>

#include <cmath>

namespace bench {
namespace params_test {
namespace {

const std::vector<ParamSpec> kSpecs = {
    ParamSpec::integer("d_ff", 0, "width").at_least(0),
    ParamSpec::number("eps", 1e-5, "eps").at_least(0),
    ParamSpec::boolean("bias", true, "bias"),
    ParamSpec::choice("layout", "half", {"half", "interleaved"}, "layout"),
    ParamSpec::numbers("factors", {1.0, 2.0}, "factors"),
};

Value table(std::vector<std::pair<std::string, Value>> kv) {
  Value::Table t;
  for (auto& [k, v] : kv) {
    v.loc = SourceLoc{"f.toml", 3, 1, {}};
    t.emplace_back(k, v);
  }
  return Value::table(std::move(t), SourceLoc{"f.toml", 2, 1, {}});
}

std::string error(const Value& given) {
  try {
    Params::resolve(kSpecs, given, "ffn 'x'", given.loc);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "none";
}

TEST(Params, DefaultsAndGivenValues) {
  const Params p = Params::resolve(kSpecs, table({{"eps", Value::integer(1)}}), "ffn 'x'", {});
  EXPECT_EQ(p.integer("d_ff"), 0);
  EXPECT_DOUBLE_EQ(p.number("eps"), 1.0);  // an integer where a float is declared converts
  EXPECT_TRUE(p.given("eps"));
  EXPECT_FALSE(p.given("bias"));
  EXPECT_EQ(p.string("layout"), "half");
  EXPECT_EQ(p.numbers("factors"), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(p.values().json(), R"({"d_ff":0,"eps":1.0,"bias":true,"layout":"half","factors":[1.0,2.0]})");
}

TEST(Params, ErrorsCarryTheLocation) {
  EXPECT_EQ(error(table({{"d_f", Value::integer(3)}})),
            "f.toml:3:1: unknown key 'd_f' for ffn 'x' (did you mean 'd_ff'?)");
  EXPECT_EQ(error(table({{"d_ff", Value::number(2.5)}})),
            "f.toml:3:1: 'd_ff' of ffn 'x' must be an integer, found float 2.5");
  EXPECT_EQ(error(table({{"d_ff", Value::integer(-1)}})), "f.toml:3:1: 'd_ff' of ffn 'x' must be >= 0, found -1");
  EXPECT_EQ(error(table({{"layout", Value::string("halve")}})),
            "f.toml:3:1: unknown value \"halve\" for 'layout' of ffn 'x'; expected one of half, interleaved (did you "
            "mean \"half\"?)");
  EXPECT_EQ(error(table({{"bias", Value::string("yes")}})),
            "f.toml:3:1: 'bias' of ffn 'x' must be a boolean, found string \"yes\"");
  EXPECT_EQ(error(table({{"eps", Value::number(NAN)}})), "f.toml:3:1: 'eps' of ffn 'x' must be finite, found nan");
}

TEST(Params, DidYouMeanOnlyWhenClose) {
  EXPECT_EQ(did_you_mean("rmsnrom", {"layernorm", "rmsnorm", "none"}), "rmsnorm");
  EXPECT_EQ(did_you_mean("zzzzzz", {"layernorm", "rmsnorm", "none"}), "");
}

}  // namespace
}  // namespace params_test
}  // namespace bench
