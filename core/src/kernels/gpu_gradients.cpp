// The gradients of shared parameters summed in rounds (kernels/gpu.h): a graph rewrite before
// backward, so a model whose blocks are used at every depth does not sum each parameter's
// gradients one add at a time.
//
// Autograd gives a leaf used k times k gradients and adds each into the leaf's buffer as it
// arrives: k − 1 launches a parameter, 237 of a Trees step's ~2,000 (79 parameters used at
// each of its 4 depths). Here every edge that led a consumer's gradient to a shared parameter's
// AccumulateGrad leads instead to an input of a round node. Parameters whose uses arrive in step
// (a block's parameters, one use a depth) form a group; a group's round k takes each one's k-th
// use (in the engine's order: the last depth first) and adds them to the sums so far in one
// multi-tensor launch (a foreach add), then hands the sums to round k + 1, the last round to the
// parameters. The engine adds the gradients in the order its consumers run,
// highest sequence number first among those ready; the rounds take them in that order too
// (sequence number, then edge), so they are the engine's sums bit for bit wherever the
// consumers ran in it (GpuGradients.* checks a Trees step, the golden gpu digests the rest). A
// round runs once its uses have arrived, so a parameter's gradients are held about a depth
// each (until 2026-11-28 one node summed them all at the end of backward, holding every use's:
// 7 extra copies of the shared blocks' parameters at the paper's 8 depths).
#include <algorithm>
#include <cstdint>
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

// Round k of a group's sums (below: parameters whose uses arrive in step): its inputs are each
// parameter's sum so far (from round k − 1; none in round 0), then each one's k-th use's
// gradient; its outputs each parameter's sum with that use added, for round k + 1 or, after the
// last round, for the parameter's AccumulateGrad. The engine runs a round as soon as its inputs
// have arrived (its sequence number is above the model's nodes'), so a parameter's gradients are
// held a round or two, not all until backward ends.
class SharedGradientSum : public Node {
 public:
  SharedGradientSum(size_t params, bool first) : params_(params), first_(first) {}

  std::string name() const override { return "htm::SharedGradientSum"; }

  variable_list apply(variable_list&& grads) override {
    variable_list sums(params_);
    const size_t offset = first_ ? 0 : params_;
    if (!first_)
      for (size_t p = 0; p < params_; ++p) sums[p] = std::move(grads[p]);
    std::vector<size_t> owners;
    std::vector<at::Tensor> left, right;
    for (size_t p = 0; p < params_; ++p) {
      at::Tensor& g = grads[offset + p];
      if (!g.defined()) continue;  // a consumer that gave this input no gradient
      if (!sums[p].defined()) {
        sums[p] = std::move(g);
        continue;
      }
      owners.push_back(p), left.push_back(sums[p]), right.push_back(g);
    }
    if (!owners.empty()) {
      auto added = at::_foreach_add(left, right);  // out of place: a gradient may be shared
      for (size_t i = 0; i < owners.size(); ++i) sums[owners[i]] = std::move(added[i]);
    }
    return sums;
  }

 private:
  size_t params_;
  bool first_;
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
  for (Node* leaf : shared) {
    auto& u = uses[leaf];
    std::stable_sort(u.begin(), u.end(), [](const Use& a, const Use& b) {
      return std::make_tuple(-static_cast<int64_t>(a.consumer->sequence_nr()), a.edge) <
             std::make_tuple(-static_cast<int64_t>(b.consumer->sequence_nr()), b.edge);
    });
  }
  // Parameters whose uses arrive in step, each round's before the next's (a block's, one use a
  // depth), are summed together: a group's round k holds the k-th uses of its parameters alone,
  // so it runs as soon as that depth's backward has given them, not once every parameter's k-th
  // use has come (the decoder's blocks' would wait for the encoder's).
  struct Group {
    std::vector<size_t> members;
    std::vector<uint64_t> lo, hi;  // each round's uses' sequence numbers
  };
  std::vector<Group> groups;
  auto seq = [&](size_t p, size_t k) { return uses[shared[p]][k].consumer->sequence_nr(); };
  // With p added, round k's uses would span [lo, hi]: in step while each round stays above the next.
  auto lo = [&](const Group& g, size_t p, size_t k) { return std::min(g.lo[k], seq(p, k)); };
  auto hi = [&](const Group& g, size_t p, size_t k) { return std::max(g.hi[k], seq(p, k)); };
  auto in_step = [&](const Group& g, size_t p) {
    if (g.lo.size() != uses[shared[p]].size()) return false;
    for (size_t k = 1; k < g.lo.size(); ++k)
      if (lo(g, p, k - 1) <= hi(g, p, k)) return false;
    return true;
  };
  for (size_t p = 0; p < shared.size(); ++p) {
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return in_step(g, p); });
    if (g == groups.end()) {
      const size_t u = uses[shared[p]].size();
      g = groups.insert(groups.end(), Group{{}, std::vector<uint64_t>(u, UINT64_MAX), std::vector<uint64_t>(u, 0)});
    }
    g->members.push_back(p);
    for (size_t k = 0; k < g->lo.size(); ++k) g->lo[k] = lo(*g, p, k), g->hi[k] = hi(*g, p, k);
  }
  // A group's rounds are made last first, each one's outputs leading to the next (the last's to
  // the parameters).
  int64_t saved = 0;
  for (const Group& g : groups) {
    const size_t n = g.members.size();
    auto variable = [&](size_t i) -> const at::Tensor& {
      return static_cast<AccumulateGrad*>(shared[g.members[i]])->variable;
    };
    std::shared_ptr<Node> after;
    for (size_t k = g.lo.size(); k-- > 0;) {
      auto round = std::make_shared<SharedGradientSum>(n, k == 0);
      torch::autograd::edge_list next;
      for (size_t i = 0; i < n; ++i)
        next.emplace_back(after ? after : shared[g.members[i]]->shared_from_this(),
                          after ? static_cast<uint32_t>(i) : 0);
      round->set_next_edges(std::move(next));
      if (k > 0)
        for (size_t i = 0; i < n; ++i) round->add_input_metadata(variable(i));
      const uint32_t offset = k > 0 ? static_cast<uint32_t>(n) : 0;
      for (size_t i = 0; i < n; ++i) {
        round->add_input_metadata(variable(i));
        const Use& use = uses[shared[g.members[i]]][k];
        // Assigned in place: set_next_edge() would renumber a node that already has parents.
        // The topological numbers only prune a backward given its inputs, which this step never is.
        use.consumer->next_edges()[use.edge] = Edge(round, offset + static_cast<uint32_t>(i));
      }
      if (k > 0) saved += static_cast<int64_t>(n);
      after = round;
    }
  }
  return saved;
}

void GpuBackend::before_backward(const at::Tensor& root) const {
  if (summing_shared_gradients()) sum_shared_gradients_at_once(root);
}

}  // namespace htm::gpu
