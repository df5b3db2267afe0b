// No positional information at all (NoPE): causal masking alone breaks the symmetry.
#include "position.h"

namespace bench::position {

class NoPosition final : public Position {
 public:
  explicit NoPosition(const Params&) {}
};

ComponentInfo nope_info() { return make_info<NoPosition>(Slot::kPosition, "none", "no position encoding (NoPE)", {}); }

}  // namespace bench::position
