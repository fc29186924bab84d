// The git revision this binary was built from, fixed at build time (cmake/build_revision.cmake):
// a run records what ran, not what the checkout holds when it starts. Declared in runner.h,
// which this file does not include: it compiles alone, without libtorch's headers.
#include <string>

#include "commands/build_revision.h"  // generated in the build folder

namespace htm {

std::string git_revision() { return HTM_BUILD_REVISION; }

}  // namespace htm
