#include "dist/grad_reducer.h"

#include <mutex>
#include <utility>

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include "dist/communicator.h"

namespace htm {

struct GradientReducer::State {
  struct Bucket {
    std::vector<int64_t> params;   ///< indices into `params`
    std::vector<int64_t> offsets;  ///< each one's first float in `buffer`
    at::Tensor buffer;             ///< gradients, then one presence flag per parameter
    int64_t waiting = 0;           ///< gradients not yet accumulated this step
  };
  Communicator& comm;
  std::vector<at::Tensor> params;
  std::vector<int64_t> bucket_of, slot_of;  ///< per parameter
  std::vector<Bucket> buckets;
  // What grad_accumulator returns: shared_ptr<Node> in 1.13 and early 2.x, intrusive_ptr<Node> later.
  using NodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));
  std::vector<NodePtr> accumulators;
  std::vector<uintptr_t> hook_keys;
  size_t next = 0;  ///< the next bucket to start: buckets start in order
  int64_t early = 0;
  bool in_backward = false;
  std::mutex mutex;

  State(std::vector<at::Tensor> p, Communicator& c) : comm(c), params(std::move(p)) {}

  void pack(Bucket& bucket, int64_t slot) {
    const auto& p = params[bucket.params[slot]];
    const int64_t n = p.numel();
    auto dst = bucket.buffer.narrow(0, bucket.offsets[slot], n);
    const auto& g = p.grad();
    if (g.defined())
      dst.view(p.sizes()).copy_(g);
    else
      dst.zero_();
    bucket.buffer[bucket.buffer.numel() - static_cast<int64_t>(bucket.params.size()) + slot] =
        g.defined() ? 1.0f : 0.0f;
  }

  void start_ready() {
    while (next < buckets.size() && buckets[next].waiting == 0) {
      comm.start_all_reduce(buckets[next].buffer);
      if (in_backward) ++early;
      ++next;
    }
  }

  void ready(int64_t param) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!in_backward) return;
    Bucket& bucket = buckets[bucket_of[param]];
    pack(bucket, slot_of[param]);
    --bucket.waiting;
    start_ready();
  }
};

GradientReducer::GradientReducer(std::vector<at::Tensor> params, Communicator& comm, int64_t bucket_bytes)
    : state_(std::make_shared<State>(std::move(params), comm)) {
  State& s = *state_;
  const int64_t n = static_cast<int64_t>(s.params.size());
  s.bucket_of.assign(n, -1);
  s.slot_of.assign(n, -1);
  int64_t floats = 0;
  for (int64_t i = n - 1; i >= 0; --i) {
    if (s.buckets.empty() || floats * 4 >= bucket_bytes) {
      s.buckets.emplace_back();
      floats = 0;
    }
    auto& b = s.buckets.back();
    s.bucket_of[i] = static_cast<int64_t>(s.buckets.size()) - 1;
    s.slot_of[i] = static_cast<int64_t>(b.params.size());
    b.params.push_back(i);
    b.offsets.push_back(floats);
    floats += s.params[i].numel();
  }
  for (auto& b : s.buckets) {
    int64_t total = static_cast<int64_t>(b.params.size());
    for (int64_t i : b.params) total += s.params[i].numel();
    b.buffer = torch::zeros({total}, torch::kFloat);
  }
  std::weak_ptr<State> weak = state_;
  for (int64_t i = 0; i < n; ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(s.params[i]);
    s.hook_keys.push_back(accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (auto state = weak.lock()) state->ready(i);
          return outputs;
        })));
    s.accumulators.push_back(std::move(accumulator));
  }
}

GradientReducer::~GradientReducer() {
  for (size_t i = 0; i < state_->accumulators.size(); ++i) state_->accumulators[i]->del_post_hook(state_->hook_keys[i]);
}

void GradientReducer::prepare() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  for (auto& b : state_->buckets) b.waiting = static_cast<int64_t>(b.params.size());
  state_->next = 0;
  state_->early = 0;
  state_->in_backward = true;
}

void GradientReducer::finish() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.in_backward = false;
    for (auto& b : s.buckets)  // parameters backward never reached this step: absent here
      if (b.waiting > 0) {
        for (size_t slot = 0; slot < b.params.size(); ++slot) s.pack(b, static_cast<int64_t>(slot));
        b.waiting = 0;
      }
    s.start_ready();
  }
  s.comm.wait_all();
  for (auto& b : s.buckets) {
    const int64_t flags = b.buffer.numel() - static_cast<int64_t>(b.params.size());
    const float* flag = b.buffer.data_ptr<float>() + flags;
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      auto& p = s.params[b.params[slot]];
      if (flag[slot] == 0) {
        p.mutable_grad() = at::Tensor();
        continue;
      }
      auto summed = b.buffer.narrow(0, b.offsets[slot], p.numel()).view(p.sizes());
      if (p.grad().defined())
        p.mutable_grad().copy_(summed);
      else
        p.mutable_grad() = summed.to(p.device(), /*non_blocking=*/false, /*copy=*/true);  // Gloo sums on the host
    }
  }
}

void GradientReducer::backward(const at::Tensor& loss) {
  prepare();
  loss.backward();
  finish();
}

int64_t GradientReducer::buckets() const { return static_cast<int64_t>(state_->buckets.size()); }
int64_t GradientReducer::started_early() const { return state_->early; }

}  // namespace htm
