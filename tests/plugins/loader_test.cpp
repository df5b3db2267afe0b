// The plugin loader: each failure is a one-line error naming the file and the step.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "plugins/registry.h"
#include "support/toml_case.h"

namespace bench {
namespace loader_test {
namespace {

const std::string kDir = std::string(BENCH_BINARY_DIR) + "/test_plugins/";

std::string load_error(const std::string& name) {
  Registry r;
  r.load_defaults();
  try {
    r.load_directory(kDir + name, true);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Loader, BuiltinPluginsRegisterEverySlot) {
  Registry& r = test::builtin_registry();
  EXPECT_EQ(r.plugins().size(), 7u);
  for (Slot s : all_slots()) EXPECT_FALSE(r.names(s).empty()) << slot_name(s);
  EXPECT_NE(r.find(Slot::kNormPosition, "double"), nullptr);
  EXPECT_TRUE(contains(r.origin(r.find(Slot::kNorm, "rmsnorm")), "libbench_norms.so"));
}

TEST(Loader, NotAPluginIsRefusedAtTheAbiCheck) {
  const std::string e = load_error("no_symbols");
  EXPECT_TRUE(contains(e, "libbad_no_symbols.so: check ABI: missing symbol bench_plugin_abi")) << e;
}

TEST(Loader, MissingEntryPointIsNamed) {
  const std::string e = load_error("missing_entry");
  EXPECT_TRUE(contains(e, "libbad_missing_entry.so: find entry point: missing symbol bench_plugin_register")) << e;
}

TEST(Loader, AbiMismatchIsRefusedBeforeRegistration) {
  const std::string e = load_error("abi_mismatch");
  EXPECT_TRUE(contains(e, "libbad_abi_mismatch.so: check ABI: built for bench-abi-0/GNU-4.8.5/")) << e;
  EXPECT_TRUE(contains(e, std::string("but this bench is ") + BENCH_ABI_TAG)) << e;
}

TEST(Loader, DuplicateNamesNameBothFiles) {
  const std::string e = load_error("duplicate");
  EXPECT_TRUE(contains(e,
                       "libbad_duplicate.so: register: duplicate component 'rmsnorm' in slot 'norm': already "
                       "registered by "))
      << e;
  EXPECT_TRUE(contains(e, "libbench_norms.so")) << e;
}

// Attention cores are one namespace for the process (the frame finds them by name): a plugin's
// core under a taken name is refused at load, naming both files, and publishes nothing.
TEST(Loader, DuplicateAttentionCoreNamesBothFiles) {
  const std::string e = load_error("duplicate_core");
  EXPECT_TRUE(contains(e,
                       "libbad_duplicate_core.so: register: duplicate attention core 'materializing': already "
                       "registered by "))
      << e;
  EXPECT_TRUE(contains(e, "libbench_attention.so")) << e;
  EXPECT_TRUE(contains(attention_core_origin("materializing"), "libbench_attention.so"));
  // The built-in cores, published once however many registries load the attention plugin.
  Registry again;
  again.load_defaults();
  const std::vector<std::string> names = attention_core_names();
  for (const char* core : {"materializing", "flash", "cudnn", "tiled"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), core), 1) << core;
    EXPECT_NE(find_attention_core(core), nullptr) << core;
  }
  EXPECT_EQ(find_attention_core("nope"), nullptr);
  std::vector<std::string> listed;
  for (const auto& [info, origin] : again.attention_cores()) {
    listed.push_back(info->name);
    EXPECT_TRUE(contains(origin, "libbench_attention.so")) << info->name;
  }
  for (const char* core : {"materializing", "flash", "cudnn", "tiled"})
    EXPECT_EQ(std::count(listed.begin(), listed.end(), core), 1) << core;
}

// The process's table itself (what the loader publishes to): the frame's own choices are not core
// names, a taken name is refused naming its file, and the same file publishing again changes nothing.
TEST(Loader, TheCoreTableRefusesReservedAndTakenNames) {
  (void)test::builtin_registry();
  const std::string attention = attention_core_origin("tiled");
  ASSERT_TRUE(contains(attention, "libbench_attention.so")) << attention;
  AttentionCoreInfo info = *find_attention_core("tiled");
  for (const char* reserved : {"auto", "ours"}) {
    info.name = reserved;
    EXPECT_EQ(publish_attention_core(info, "/elsewhere/libx.so"),
              "attention core name '" + std::string(reserved) + "' is reserved (the frame's choice among cores)");
  }
  info.name = "";
  EXPECT_EQ(publish_attention_core(info, "/elsewhere/libx.so"), "an attention core has no name");
  info.name = "tiled";
  EXPECT_EQ(publish_attention_core(info, "/elsewhere/libx.so"),
            "duplicate attention core 'tiled': already registered by " + attention);
  const size_t before = attention_core_names().size();
  EXPECT_EQ(publish_attention_core(info, attention), "");
  EXPECT_EQ(attention_core_names().size(), before);
  EXPECT_EQ(find_attention_core("auto"), nullptr);
}

// The defaults an experiment gets where it names no component come from the plugins, one per slot.
TEST(Loader, EverySlotsPluginDeclaresItsDefault) {
  const Registry& r = test::builtin_registry();
  const std::vector<std::pair<Slot, std::string>> expected = {
      {Slot::kEmbedding, "token"},  {Slot::kPosition, "rope"}, {Slot::kBlock, "serial"},
      {Slot::kNormPosition, "pre"}, {Slot::kNorm, "rmsnorm"},  {Slot::kAttention, "causal"},
      {Slot::kFfn, "swiglu"},       {Slot::kHead, "lm_head"},  {Slot::kDataset, "synthetic"}};
  for (const auto& [slot, name] : expected) {
    const ComponentInfo* d = r.default_component(slot);
    ASSERT_NE(d, nullptr) << slot_name(slot);
    EXPECT_EQ(d->name, name) << slot_name(slot);
    EXPECT_EQ(d, r.find(slot, name));
  }
  // An experiment that names nothing gets them, and they are stored by name.
  const ResolvedCase rc = test::resolve_first("[stability]\n");
  for (const auto& [slot, name] : expected)
    EXPECT_EQ((slot == Slot::kDataset ? rc.data : rc.model.slot(slot)).info->name, name) << slot_name(slot);
  Registry empty;
  EXPECT_EQ(empty.default_component(Slot::kNorm), nullptr);
}

TEST(Loader, ASecondDefaultForASlotNamesBothFiles) {
  const std::string e = load_error("second_default");
  EXPECT_TRUE(contains(e,
                       "libbad_second_default.so: register: default norm 'plain_norm': slot 'norm' already has "
                       "default 'rmsnorm' from "))
      << e;
  EXPECT_TRUE(contains(e, "libbench_norms.so")) << e;
}

TEST(Loader, ADefaultMustBeTheDeclaringPluginsOwn) {
  const std::string e = load_error("default_unknown");
  EXPECT_TRUE(contains(e,
                       "libbad_default_unknown.so: register: default ffn 'ghost': the plugin registers no such "
                       "component"))
      << e;
}

TEST(Loader, ThrowingRegistrationIsAnErrorValue) {
  const std::string e = load_error("throwing_register");
  EXPECT_TRUE(contains(e, "libbad_throwing_register.so: register: cannot register today")) << e;
}

TEST(Loader, ThrowingFactoryNamesThePluginWhenUsed) {
  Registry r;
  r.load_defaults();
  r.load_directory(kDir + "throwing_factory", true);
  const ComponentInfo* info = r.find(Slot::kNorm, "explodes");
  ASSERT_NE(info, nullptr);
  try {
    r.create(*info, Params());
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(
        contains(e.what(), "libbad_throwing_factory.so: norm 'explodes': factory threw: kaboom from the factory"))
        << e.what();
  }
}

TEST(Loader, MissingDirectoryAndDoubleLoads) {
  Registry r;
  EXPECT_THROW(r.load_directory("/nonexistent/plugins", true), Error);
  r.load_directory("/nonexistent/plugins", false);
  r.load_defaults();
  const size_t n = r.plugins().size();
  r.load_defaults();  // the same files again: skipped, not duplicates
  EXPECT_EQ(r.plugins().size(), n);
}

}  // namespace
}  // namespace loader_test
}  // namespace bench
