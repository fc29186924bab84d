// The exact minimum-cost assignment on the device (kernels/gpu.h): the point-set loss's matching
// without the host, so a Trees or Crosses step can be captured as a CUDA graph.
//
// Dynamic programming over subsets of the targets: f_k(S), for a set S of k targets, is the least
// cost of assigning predictions 0 … k−1 to S, and f_k(S) = min over j in S of f_{k−1}(S∖{j}) +
// cost[k−1][j]. Layer k holds the C(N, k) sets of k targets; each layer is one gather, one add and
// one minimum over the batch at once, so N layers forward and N steps back through the recorded
// minima give every sample's assignment in about 8N launches and no read-back. The work is
// N·2^(N−1) candidates a sample (8.4 million at N = 16, nothing on a GPU; the host's Hungarian
// method is O(N³)), which is why it stops at kMaxDeviceAssignment.
#include <algorithm>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "kernels/gpu.h"

namespace htm::gpu {

namespace {

// Layer k's sets in increasing order of their bit masks; for each set and target j, where the
// set without j stands in layer k − 1 (0 where j is not in the set) and whether j is not in it.
struct Layer {
  torch::Tensor before;  // C(N,k)·N int64, flat
  torch::Tensor absent;  // C(N,k)×N bool
};

std::vector<Layer> make_layers(int64_t n, const torch::Device& device) {
  const int64_t sets = int64_t{1} << n;
  std::vector<int64_t> position(sets), count(n + 1, 0);
  for (int64_t mask = 0; mask < sets; ++mask) {
    const int64_t k = __builtin_popcountll(static_cast<unsigned long long>(mask));
    position[mask] = count[k]++;
  }
  std::vector<std::vector<int64_t>> before(n + 1);
  std::vector<std::vector<uint8_t>> absent(n + 1);
  for (int64_t mask = 0; mask < sets; ++mask) {
    const int64_t k = __builtin_popcountll(static_cast<unsigned long long>(mask));
    for (int64_t j = 0; j < n; ++j) {
      const bool in = (mask >> j) & 1;
      before[k].push_back(in ? position[mask ^ (int64_t{1} << j)] : 0);
      absent[k].push_back(in ? 0 : 1);
    }
  }
  std::vector<Layer> layers(n + 1);
  for (int64_t k = 1; k <= n; ++k) {
    layers[k].before = torch::tensor(before[k], torch::kLong).to(device);
    layers[k].absent = torch::tensor(absent[k], torch::kUInt8).view({count[k], n}).to(torch::kBool).to(device);
  }
  return layers;
}

// The tables for N targets on a device, made once (before a capture: a capture copies nothing from
// the host, and the steps it follows made them). Never freed: they outlive every step.
const std::vector<Layer>& layers_for(int64_t n, const torch::Device& device) {
  static std::mutex mutex;
  static auto* made = new std::map<std::pair<int64_t, std::string>, std::vector<Layer>>();
  std::lock_guard<std::mutex> lock(mutex);
  auto key = std::make_pair(n, device.str());
  auto found = made->find(key);
  if (found == made->end()) {
    if (capturing())
      throw Error("the device's set matching met N = " + std::to_string(n) + " on " + device.str() +
                  " first inside a capture (its tables are made by an eager step)");
    found = made->emplace(key, make_layers(n, device)).first;
  }
  return found->second;
}

}  // namespace

torch::Tensor min_cost_assignment(const torch::Tensor& cost) {
  if (cost.dim() != 3 || cost.size(1) != cost.size(2))
    throw Error("min_cost_assignment: cost must be B×N×N, got " + c10::str(cost.sizes()));
  const int64_t B = cost.size(0), n = cost.size(1);
  if (n > kMaxDeviceAssignment)
    throw Error("min_cost_assignment: N = " + std::to_string(n) + " is over " + std::to_string(kMaxDeviceAssignment));
  torch::NoGradGuard no_grad;
  if (n == 0) return torch::empty({B, 0}, cost.options().dtype(torch::kLong));
  const auto& layers = layers_for(n, cost.device());
  // The widest layer's candidates, C(N, N/2)·N a sample, kept under 2^24 values a launch (128 MiB
  // in double): an evaluation batch of 256 sets of 16 goes in four parts.
  const int64_t widest = layers[n / 2 > 0 ? n / 2 : 1].absent.numel();
  const int64_t part = std::max<int64_t>(1, (int64_t{1} << 24) / widest);
  if (B > part) {
    std::vector<torch::Tensor> parts;
    for (const auto& some : cost.split(part)) parts.push_back(min_cost_assignment(some));
    return torch::cat(parts);
  }
  const double inf = std::numeric_limits<double>::infinity();
  auto least = torch::zeros({B, 1}, cost.options());  // f_0(∅) = 0
  std::vector<torch::Tensor> choice(n + 1);           // the target taken last, per set
  for (int64_t k = 1; k <= n; ++k) {
    const Layer& layer = layers[k];
    auto candidates = least.index_select(1, layer.before).view({B, -1, n}) + cost.select(1, k - 1).unsqueeze(1);
    // Filling replaces NaN too: a non-finite cost gives a non-finite total, never an index outside the set.
    candidates.masked_fill_(layer.absent, inf);
    std::tie(least, choice[k]) = candidates.min(2);
  }
  // Back from the whole set: layer k's choice is the target of prediction k − 1.
  std::vector<torch::Tensor> taken(n);
  auto set = torch::zeros({B, 1}, choice[n].options());
  for (int64_t k = n; k >= 1; --k) {
    auto j = choice[k].gather(1, set);
    taken[k - 1] = j;
    set = layers[k].before.index_select(0, (set * n + j).view(-1)).view({B, 1});
  }
  return torch::cat(taken, 1);
}

}  // namespace htm::gpu
