// Registers fine; its factory throws when a case asks for the component.
#include <stdexcept>

#include "bench/bench.h"

BENCH_PLUGIN("throwing_factory", "0.1", "test plugin: a factory that throws") {
  bench::ComponentInfo info;
  info.slot = bench::Slot::kNorm;
  info.name = "explodes";
  info.doc = "always throws";
  info.factory = [](const bench::Params&) -> std::unique_ptr<bench::Component> {
    throw std::runtime_error("kaboom from the factory");
  };
  registrar.add(std::move(info));
}
