// The gradients of shared parameters summed at once (kernels/gpu.h): a graph rewrite before
// backward, so a model whose blocks are used at every depth does not sum each parameter's
// gradients one add at a time.
//
// Autograd gives a leaf used k times k gradients and adds each into the leaf's buffer as it
// arrives: k − 1 launches a parameter, 237 of a Trees step's ~2,000 (79 parameters used at
// each of its 4 depths). Here every edge that led a consumer's gradient to a shared parameter's
// AccumulateGrad leads instead to an input of its own on one node, which the engine runs once
// all of them have arrived (at the end of backward: nothing else waits on a parameter's
// gradient) and which sums them for all parameters together in a few multi-tensor launches
// (foreach adds, one round per use), then hands each parameter its sum. The engine adds the
// gradients in the order its consumers run, highest sequence number first among those ready;
// the sums here take them in that order too (sequence number, then edge), so they are the
// engine's sums bit for bit wherever the consumers ran in it (GpuGradients.* checks a Trees
// step, the golden gpu digests the rest).
#include <algorithm>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/torch.h>

#include "kernels/gpu.h"

namespace htm::gpu {
namespace {

using torch::autograd::AccumulateGrad;
using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

// One input a use of a shared parameter, one output a parameter (its AccumulateGrad).
class SharedGradientSum : public Node {
 public:
  // uses[p]: parameter p's inputs, in the order the engine would have added them.
  explicit SharedGradientSum(std::vector<std::vector<size_t>> uses) : uses_(std::move(uses)) {}

  std::string name() const override { return "htm::SharedGradientSum"; }

  variable_list apply(variable_list&& grads) override {
    variable_list sums(uses_.size());
    size_t rounds = 0;
    for (const auto& u : uses_) rounds = std::max(rounds, u.size());
    for (size_t k = 0; k < rounds; ++k) {
      std::vector<size_t> owners;
      std::vector<at::Tensor> left, right;
      for (size_t p = 0; p < uses_.size(); ++p) {
        if (k >= uses_[p].size()) continue;
        at::Tensor& g = grads[uses_[p][k]];
        if (!g.defined()) continue;  // a consumer that gave this input no gradient
        if (!sums[p].defined()) {
          sums[p] = std::move(g);
          continue;
        }
        owners.push_back(p), left.push_back(sums[p]), right.push_back(g);
      }
      if (owners.empty()) continue;
      auto added = at::_foreach_add(left, right);  // out of place: a gradient may be shared
      for (size_t i = 0; i < owners.size(); ++i) sums[owners[i]] = std::move(added[i]);
    }
    return sums;
  }

 private:
  std::vector<std::vector<size_t>> uses_;
};

thread_local bool g_at_once = true;

struct Use {
  Node* consumer;
  size_t edge;
};

}  // namespace

bool summing_shared_gradients() { return g_at_once; }
SharedGradientsScope::SharedGradientsScope(bool at_once) : previous_(g_at_once) { g_at_once = at_once; }
SharedGradientsScope::~SharedGradientsScope() { g_at_once = previous_; }

int64_t sum_shared_gradients_at_once(const at::Tensor& root) {
  if (!root.defined() || !root.grad_fn()) return 0;
  // Every edge into a parameter's AccumulateGrad, found from the root.
  std::unordered_map<Node*, std::vector<Use>> uses;
  std::vector<Node*> order;  // the parameters as first met, for a stable output order
  std::unordered_set<Node*> seen;
  std::vector<Node*> todo{root.grad_fn().get()};
  while (!todo.empty()) {
    Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    const auto& edges = node->next_edges();
    for (size_t e = 0; e < edges.size(); ++e) {
      Node* next = edges[e].function.get();
      if (next == nullptr) continue;
      if (auto* leaf = dynamic_cast<AccumulateGrad*>(next); leaf != nullptr) {
        if (leaf->variable.layout() != at::kStrided) continue;  // sparse: the engine's own sum
        auto& u = uses[next];
        if (u.empty()) order.push_back(next);
        u.push_back({node, e});
      } else {
        todo.push_back(next);
      }
    }
  }
  std::vector<Node*> shared;
  for (Node* leaf : order)
    if (uses[leaf].size() > 1) shared.push_back(leaf);
  if (shared.empty()) return 0;

  // The engine's order of arrival: consumers by sequence number, highest first, then by edge.
  std::vector<std::vector<size_t>> slots(shared.size());
  std::vector<std::pair<Use, size_t>> inputs;  // each input's use and its parameter
  for (size_t p = 0; p < shared.size(); ++p) {
    auto& u = uses[shared[p]];
    std::stable_sort(u.begin(), u.end(), [](const Use& a, const Use& b) {
      return std::make_tuple(-static_cast<int64_t>(a.consumer->sequence_nr()), a.edge) <
             std::make_tuple(-static_cast<int64_t>(b.consumer->sequence_nr()), b.edge);
    });
    for (const Use& use : u) slots[p].push_back(inputs.size()), inputs.emplace_back(use, p);
  }
  torch::autograd::edge_list next;
  for (Node* leaf : shared) next.emplace_back(leaf->shared_from_this(), 0);
  auto sum = std::make_shared<SharedGradientSum>(std::move(slots));
  sum->set_next_edges(std::move(next));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& [use, p] = inputs[i];
    sum->add_input_metadata(static_cast<AccumulateGrad*>(shared[p])->variable);
    // Assigned in place: set_next_edge() would renumber a node that already has parents. The
    // topological numbers only prune a backward given its inputs, which this step never is.
    use.consumer->next_edges()[use.edge] = Edge(sum, static_cast<uint32_t>(i));
  }
  return static_cast<int64_t>(inputs.size() - shared.size());
}

}  // namespace htm::gpu
