// The plugins this build made, loaded once per test binary for every suite that composes them.
#pragma once

#include "registry.h"

namespace htm::testing {

inline const Registry& plugins() {
  static const Registry r({HTM_PLUGIN_DIR});
  return r;
}

}  // namespace htm::testing
