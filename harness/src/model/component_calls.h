// defines: bench::ComponentTag, Pass, ComponentListener, listen_components, ComponentCall,
//          wrap_component
//
// Which component is running, for the profile (runners/profile.h): the model hands out each
// component it builds wrapped (wrap_component), and the wrapper opens a ComponentCall around
// every call into it. With no listener on the thread (every timed and every training step) a call
// costs one thread-local read. Calls nest as components call their children (a norm position
// calls its norms and the sublayer it wraps), and the listener sees them nested.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "bench/component.h"

namespace bench {

/// Where a built component sits: its scope ("blocks.0.attn_norm"), slot ("norm_position") and
/// type ("pre").
struct ComponentTag {
  std::string scope, slot, component;
};

/// Which part of a step a call belongs to: the forward, the backward, the optimizer's update, or
/// the step around them (zeroing gradients, waiting for the device).
enum class Pass : uint8_t { kForward, kBackward, kOptimizer, kStep };
const char* pass_name(Pass p);

/// Told about every call into a wrapped component on the thread it is installed on.
class ComponentListener {
 public:
  virtual ~ComponentListener();
  virtual void enter(const ComponentTag& tag, Pass pass) = 0;
  virtual void leave() = 0;
};

/// Install `listener` on the calling thread (nullptr: none); returns the one it replaces.
ComponentListener* listen_components(ComponentListener* listener);
/// The calling thread's listener, or nullptr.
ComponentListener* component_listener();

/// One call into a component, from construction to destruction, for the thread's listener.
class ComponentCall {
 public:
  ComponentCall(const ComponentTag& tag, Pass pass) : listener_(component_listener()) {
    if (listener_ != nullptr) listener_->enter(tag, pass);
  }
  ~ComponentCall() {
    if (listener_ != nullptr) listener_->leave();
  }
  ComponentCall(const ComponentCall&) = delete;
  ComponentCall& operator=(const ComponentCall&) = delete;

 private:
  ComponentListener* listener_;
};

/// `inner` (set up, implementing the interface of `slot`) wrapped so that each call into it is a
/// ComponentCall tagged `tag`; every other method is passed through, and the wrapper adopts
/// inner's children. The wrapper owns inner.
std::unique_ptr<Component> wrap_component(Slot slot, std::unique_ptr<Component> inner, ComponentTag tag);

}  // namespace bench
