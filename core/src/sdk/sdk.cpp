// Out-of-line destructors: they anchor each interface's typeinfo in libhtm_core, so a
// dynamic_cast from a plugin's object to its interface works across shared libraries.
#include <torch/torch.h>

#include "htm/adapter.h"
#include "htm/dataset.h"
#include "htm/error.h"
#include "htm/loss.h"
#include "htm/merge.h"
#include "htm/plugin.h"
#include "htm/policy.h"

namespace htm {

Error::~Error() = default;
Plugin::~Plugin() = default;
Policy::~Policy() = default;
MergeOperator::~MergeOperator() = default;
Loss::~Loss() = default;
Adapter::~Adapter() = default;

torch::Tensor Adapter::reconstruction_error(const torch::Tensor& output, const torch::Tensor& input) {
  return (output - input).pow(2).flatten(1).mean(1);
}
Dataset::~Dataset() = default;

}  // namespace htm
