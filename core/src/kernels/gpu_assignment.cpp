// The exact minimum-cost assignment on the device (kernels/gpu.h): the point-set loss's matching
// without the host, so a Trees or Crosses step can be captured as a CUDA graph.
//
// Dynamic programming over subsets of the targets: f_k(S), for a set S of k targets, is the least
// cost of assigning predictions 0 … k−1 to S, and f_k(S) = min over j in S of f_{k−1}(S∖{j}) +
// cost[k−1][j]. Layer k holds the C(N, k) sets of k targets, each with its k members; a layer is
// a gather (of both terms from one store of the costs and every layer's minima), an add and a
// minimum over the batch at once, so N layers forward and N steps back through the recorded
// minima (a gather and an index each) give every sample's assignment in about 5N launches and no
// read-back; on a GPU, where nvcc built set_assignment.cu, the same programme is one launch (a
// block a sample; HTM_CUDA_ASSIGNMENT=0 keeps the layers). The work is
// N·2^(N−1) candidates a sample (524,288 at N = 16, nothing on a GPU; the host's Hungarian method
// is O(N³)), which is why it stops at kMaxDeviceAssignment.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "kernels/gpu.h"
#include "kernels/set_assignment.h"

#if HTM_CUDA_KERNELS_BUILT
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

// set_assignment.cu (nvcc): every sample's assignment in one launch, queued on `stream`; a cudaError_t.
extern "C" int htm_cuda_min_cost_assignment(const double* cost, int64_t B, int64_t N, int64_t* out, double* f,
                                            uint8_t* choice, void* stream);
#endif

namespace htm::gpu {

static_assert(kMaxDeviceAssignment <= assignment::kMaxElements, "the CUDA kernel takes every size the layers take");

namespace {

// Layer k's sets in increasing order of their bit masks, each with its k members in increasing
// order: the member (a target) and where the set without it stands in layer k − 1.
struct Layer {
  torch::Tensor both;      // C(N,k) × k × 2 int64: member and before side by side (one index going back)
  torch::Tensor pick;      // 2·C(N,k)·k: the rows of the store (below) each candidate adds
  int64_t at = 0;          // where the layer's minima stand in the store
  int64_t candidates = 0;  // C(N,k)·k
};

// The store's rows: the N×N costs (prediction-major), then f_0, f_1, …, f_N, C(N, k) rows each.
int64_t minima_at(int64_t n, int64_t k) {
  int64_t at = n * n, sets = 1;  // C(n, 0)
  for (int64_t i = 0; i < k; ++i) at += sets, sets = sets * (n - i) / (i + 1);
  return at;
}

std::vector<Layer> make_layers(int64_t n, const torch::Device& device) {
  const int64_t sets = int64_t{1} << n;
  std::vector<int64_t> position(sets), count(n + 1, 0);
  for (int64_t mask = 0; mask < sets; ++mask) {
    const int64_t k = __builtin_popcountll(static_cast<unsigned long long>(mask));
    position[mask] = count[k]++;
  }
  std::vector<std::vector<int64_t>> member(n + 1), before(n + 1);
  for (int64_t mask = 0; mask < sets; ++mask) {
    const int64_t k = __builtin_popcountll(static_cast<unsigned long long>(mask));
    for (int64_t j = 0; j < n; ++j)
      if ((mask >> j) & 1) {
        member[k].push_back(j);
        before[k].push_back(position[mask ^ (int64_t{1} << j)]);
      }
  }
  std::vector<Layer> layers(n + 1);
  for (int64_t k = 1; k <= n; ++k) {
    const auto members = torch::tensor(member[k], torch::kLong), befores = torch::tensor(before[k], torch::kLong);
    layers[k].both = torch::stack({members, befores}, 1).view({-1, k, 2}).to(device);
    // f_{k−1}(S∖{j}) first, then cost[k−1][j]: the add's operands in the order they always had.
    layers[k].pick = torch::cat({befores + minima_at(n, k - 1), members + (k - 1) * n}).to(device);
    layers[k].at = minima_at(n, k);
    layers[k].candidates = members.numel();
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

// N, for a B×N×N cost with N ≤ kMaxDeviceAssignment; an error for any other shape.
int64_t checked_size(const torch::Tensor& cost) {
  if (cost.dim() != 3 || cost.size(1) != cost.size(2))
    throw Error("min_cost_assignment: cost must be B×N×N, got " + c10::str(cost.sizes()));
  if (cost.size(1) > kMaxDeviceAssignment)
    throw Error("min_cost_assignment: N = " + std::to_string(cost.size(1)) + " is over " +
                std::to_string(kMaxDeviceAssignment));
  return cost.size(1);
}

}  // namespace

torch::Tensor min_cost_assignment(const torch::Tensor& cost) {
  const int64_t B = cost.size(0), n = checked_size(cost);
  torch::NoGradGuard no_grad;
  if (n == 0 || B == 0) return torch::empty({B, n}, cost.options().dtype(torch::kLong));
  if (cost.is_cpu() && cost.scalar_type() == torch::kDouble) {  // the kernel's steps, a set after another
    const auto c = cost.contiguous();
    auto out = torch::empty({B, n}, cost.options().dtype(torch::kLong));
    std::vector<double> f(size_t{1} << n);
    std::vector<uint8_t> choice(size_t{1} << n);
    assignment::assign_on_host(c.data_ptr<double>(), B, n, out.data_ptr<int64_t>(), f.data(), choice.data());
    return out;
  }
#if HTM_CUDA_KERNELS_BUILT
  // On a GPU, the same programme in one launch (set_assignment.cu; its steps tested against these
  // layers by DeviceAssignment.TheKernelsSteps*, its code by CudaEmulation.* on the CPU, the kernel
  // by DeviceAssignment.OnAGpu* on a GPU). HTM_CUDA_ASSIGNMENT=0 keeps the layers.
  static const bool kernel_wanted = cuda_kernel_wanted("HTM_CUDA_ASSIGNMENT");
  if (kernel_wanted && cost.is_cuda() && cost.scalar_type() == torch::kDouble) {
    const c10::cuda::CUDAGuard guard(cost.device());
    const auto c = cost.contiguous();
    auto out = torch::empty({B, n}, cost.options().dtype(torch::kLong));
    auto f = torch::empty({B, int64_t{1} << n}, cost.options());
    auto choice = torch::empty({B, int64_t{1} << n}, cost.options().dtype(torch::kByte));
    const int error =
        htm_cuda_min_cost_assignment(c.data_ptr<double>(), B, n, out.data_ptr<int64_t>(), f.data_ptr<double>(),
                                     choice.data_ptr<uint8_t>(), c10::cuda::getCurrentCUDAStream().stream());
    check_launch(error, "the set assignment");
    return out;
  }
#endif
  return min_cost_assignment_layers(cost);
}

torch::Tensor min_cost_assignment_layers(const torch::Tensor& cost) {
  const int64_t B = cost.size(0), n = checked_size(cost);
  torch::NoGradGuard no_grad;
  if (n == 0 || B == 0) return torch::empty({B, n}, cost.options().dtype(torch::kLong));
  const auto& layers = layers_for(n, cost.device());
  // The widest layer's candidates (C(N, k)·k a sample, 102,960 at N = 16) kept under 2^24 values a
  // launch (128 MiB in double): an evaluation batch of 256 sets of 16 goes in two parts.
  int64_t widest = 1;
  for (int64_t k = 1; k <= n; ++k) widest = std::max(widest, layers[k].candidates);
  const int64_t part = std::max<int64_t>(1, (int64_t{1} << 24) / widest);
  if (B > part) {
    std::vector<torch::Tensor> parts;
    for (const auto& some : cost.split(part)) parts.push_back(min_cost_assignment_layers(some));
    return torch::cat(parts);
  }
  // Sets along the first dimension and samples along the second: each gather copies whole rows.
  // One store holds the costs and every layer's minima, so a layer gathers both its terms at once.
  auto store = torch::empty({minima_at(n, n) + 1, B}, cost.options());
  store.narrow(0, 0, n * n).view({n, n, B}).copy_(cost.permute({1, 2, 0}));  // prediction-major
  store.narrow(0, minima_at(n, 0), 1).zero_();                               // f_0(∅) = 0
  std::vector<torch::Tensor> choice(n + 1);                                  // which member was taken last, per set
  for (int64_t k = 1; k <= n; ++k) {
    const Layer& layer = layers[k];
    const int64_t candidates = layer.candidates;
    const auto terms = store.index_select(0, layer.pick);
    const auto sum = terms.narrow(0, 0, candidates) + terms.narrow(0, candidates, candidates);
    auto least = store.narrow(0, layer.at, candidates / k);
    choice[k] = torch::empty({candidates / k, B}, cost.options().dtype(torch::kLong));
    at::min_out(least, choice[k], sum.view({-1, k, B}), 1);
  }
  // Back from the whole set: layer k's choice is the target of prediction k − 1.
  std::vector<torch::Tensor> taken(n);
  auto set = torch::zeros({1, B}, choice[n].options());
  for (int64_t k = n; k >= 1; --k) {
    const auto last = choice[k].gather(0, set).view(-1);          // which of the set's members
    const auto row = layers[k].both.index({set.view(-1), last});  // B × (member, before)
    taken[k - 1] = row.select(1, 0);
    set = row.select(1, 1).view({1, B});
  }
  return torch::stack(taken, 1);
}

torch::Tensor GpuBackend::min_cost_assignment(const torch::Tensor& cost) const {
  // Small sets on the device, with no read-back (a CUDA graph can hold it); larger ones on the host.
  if (cost.dim() == 3 && cost.size(1) <= kMaxDeviceAssignment) return gpu::min_cost_assignment(cost);
  return Backend::min_cost_assignment(cost);
}

}  // namespace htm::gpu
