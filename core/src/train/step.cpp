#include "train/step.h"

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "dist/communicator.h"
#include "dist/grad_reducer.h"
#include "htm/error.h"
#include "htm/sets.h"
#include "kernels/backend.h"
#include "kernels/graph_draws.h"
#include "kernels/row_shard_scope.h"
#include "train/step_graph.h"

namespace htm {
namespace {

// The model's parameters (policy = false) or the policy's (true): the policy gets its own
// optimiser when estimator.policy_lr asks for its own rate.
std::vector<torch::Tensor> parameters_of(Experiment& ex, bool policy) {
  const bool split = ex.config.settings.estimator.policy_lr > 0;
  std::vector<torch::Tensor> out;
  for (const auto& p : ex.model->named_parameters())
    if ((split && p.key().rfind("policy.", 0) == 0) == policy) out.push_back(p.value());
  return out;
}

}  // namespace

BatchShare share_of_batch(Communicator& comm, const torch::Tensor& per_sample_loss, int64_t rows, int64_t batch_rows,
                          bool stop_here, bool* stop_anywhere) {
  const auto sums = comm.sum({per_sample_loss.detach().sum().item<double>(), stop_here ? 1.0 : 0.0});
  if (stop_anywhere != nullptr) *stop_anywhere = sums[1] > 0;
  return {static_cast<double>(rows) / batch_rows, sums[0] / static_cast<double>(batch_rows), true};
}

TrainStep::~TrainStep() = default;

TrainStep::TrainStep(Experiment& ex, at::Generator generator, Communicator* comm)
    : ex_(ex),
      generator_(std::move(generator)),
      comm_(comm),
      optimizer_(parameters_of(ex, false), ex.config.settings.train.lr, ex.config.settings.train.weight_decay),
      policy_optimizer_(parameters_of(ex, true), ex.config.settings.estimator.policy_lr,
                        ex.config.settings.train.weight_decay),
      estimator_(ex.config.settings.estimator, ex.values) {
  const EstimatorSettings& estimating = ex.config.settings.estimator;
  if (estimating.replay > 0) {
    if (comm != nullptr) throw Error("estimator.replay is not supported in data-parallel training (--nproc)");
    replay_.emplace(estimating.replay_capacity);
  }
  if (comm != nullptr) reducer_ = std::make_unique<GradientReducer>(ex.model->parameters(), *comm);
  if (ex.config.settings.runtime.cuda_graph != RuntimeCudaGraph::off) start_graphs();
}

void TrainStep::set_lr(double lr) {
  optimizer_.set_lr(lr);
  policy_optimizer_.set_lr(ex_.config.settings.estimator.policy_lr * lr / ex_.config.settings.train.lr);
}

StepReport TrainStep::operator()(const StepRequest& request) {
  if (!graphs_) return eager_step(request);
  seed_step();
  if (auto report = replayed_step(request)) return *report;
  GraphDraws draws;
  return eager_step(request);
}

StepReport TrainStep::eager_step(const StepRequest& request) {
  StepReport report;
  const Pass pass = forward(request, report);
  const torch::Tensor total = objective(request, pass, report);
  if (phase_ended) phase_ended();
  backward(total);
  if (phase_ended) phase_ended();
  update(request, report);
  if (pass.share.split)
    report.loss = pass.share.batch_loss;
  else if (loss_later_ && !request.log)
    report.loss_later = LaterRead(pass.per_sample.detach().mean());
  else
    report.loss = pass.per_sample.mean().item<double>();
  return report;
}

void TrainStep::gradients(const StepRequest& request) {
  std::optional<GraphDraws> draws;
  if (graphs_) {
    seed_step();
    draws.emplace();
  }
  StepReport report;
  const Pass pass = forward(request, report);
  backward(objective(request, pass, report));
}

ForwardResult TrainStep::model_pass(const Batch& batch, const std::vector<int64_t>& schedule,
                                    const StepRequest& request, bool teacher_forced,
                                    const std::vector<MergeDecision>* replayed) {
  ForwardHooks hooks = loss_hooks(ex_.losses, request.epoch, request.step, true, generator_);
  hooks.tree = batch.tree;
  if (replayed != nullptr) hooks.merges = *replayed;
  hooks.pair_errors = estimator_.wants_pair_errors();
  if (teacher_forced) return ex_.model->forward_teacher_forced(batch.input, schedule, generator_, &hooks);
  hooks.levels = ex_.config.settings.train.anytime > 0;
  return ex_.model->forward(batch.input, schedule, generator_, &hooks);
}

torch::Tensor TrainStep::reference_losses(const Batch& batch, const StepRequest& request) {
  auto* model = dynamic_cast<HtmModelImpl*>(ex_.model.get());
  if (model == nullptr || !ex_.baseline_policy)
    throw Error("estimator.baseline = \"policy\" needs the htm model and estimator.baseline_policy");
  PolicySwitch under(*model, ex_.baseline_policy);
  torch::NoGradGuard no_grad;
  const ForwardResult out = model_pass(batch, request.schedule, request, false);
  return training_objective(ex_.losses, out, batch, request.epoch, request.step, true, false, nullptr,
                            ex_.config.settings.train.anytime);
}

TrainStep::Pass TrainStep::forward(const StepRequest& request, StepReport& report) {
  RECORD_FUNCTION("htm::forward", {});
  // The last step's gradients go as this one begins, not as its backward does: its forward's
  // activations need not sit beside them (a model's worth of memory at the forward's peak).
  optimizer_.zero_grad();
  policy_optimizer_.zero_grad();
  Pass pass;
  pass.batch = request.batch;
  const int64_t K = estimator_.rollouts();
  if (K > 1) {  // K adjacent copies of each input, each drawing its own decisions
    // One copy each (repeat_interleave's would be several launches and, on a GPU, a read back).
    auto repeated = [K](const torch::Tensor& t) {
      auto sizes = t.sizes().vec();
      sizes.insert(sizes.begin() + 1, K);
      auto shape = t.sizes().vec();
      shape[0] *= K;
      return t.unsqueeze(1).expand(sizes).reshape(shape);
    };
    pass.batch.input = repeated(pass.batch.input);
    if (pass.batch.labels.defined()) pass.batch.labels = repeated(pass.batch.labels);
    if (pass.batch.tree.defined()) pass.batch.tree = repeated(pass.batch.tree);
  }
  const int64_t rows = request.batch.input.size(0);
  {
    // Data-parallel: random draws are made for the whole batch and this rank keeps its rows.
    std::optional<RowShardScope> shard;
    if (comm_ != nullptr) shard.emplace(RowShard{request.first * K, rows * K, request.batch_rows * K});
    pass.out = model_pass(pass.batch, request.schedule, request, request.teacher_forced);
    try {
      pass.per_sample = training_objective(ex_.losses, pass.out, pass.batch, request.epoch, request.step, true,
                                           request.teacher_forced, request.log ? &report.pending : nullptr,
                                           ex_.config.settings.train.anytime);
    } catch (const NonFinite& e) {
      throw Error("training diverged at step " + std::to_string(request.step + 1) + ": " + e.what());
    }
    if (estimator_.wants_reference() && !request.teacher_forced) pass.reference = reference_losses(pass.batch, request);
  }                      // the forward pass's draws are made; evaluation draws for itself
  if (comm_ != nullptr)  // the whole batch's loss, and whether any rank was asked to stop
    pass.share = share_of_batch(*comm_, pass.per_sample, rows * K, request.batch_rows * K, request.stop_here,
                                &report.stop_anywhere);
  return pass;
}

torch::Tensor TrainStep::objective(const StepRequest& request, const Pass& pass, StepReport& report) {
  RECORD_FUNCTION("htm::forward", {});
  // The surrogate for the discrete decisions (paper eq. 4): loss + sg[reward]·Σ log p.
  torch::Tensor total =
      estimator_.objective(pass.per_sample, pass.out, pass.share, !request.teacher_forced, pass.reference);
  if (replay_ && !request.teacher_forced) {  // an earlier step's draw again, weighted by p_now / p_then
    if (auto past = replay_->draw(ex_.config.settings.estimator.replay, generator_)) {
      // Its pair errors are measured (an operator may draw while it does) but not rewarded.
      auto rout = model_pass(past->batch, past->schedule, request, false, &past->merges);
      auto g = training_objective(ex_.losses, rout, past->batch, request.epoch, request.step, true, false, nullptr,
                                  ex_.config.settings.train.anytime);
      const double rows_ratio = static_cast<double>(g.size(0)) / static_cast<double>(pass.per_sample.size(0));
      total = total + rows_ratio * estimator_.replayed(g, total_log_prob(rout), merge_log_prob(rout), past->behaviour);
    }
    replay_->add(pass.batch, request.schedule, pass.out);
  }
  if (pass.out.leaf_loss.defined()) {  // a probe on detached tokens: outside the policy's reward
    total = total + pass.share.fraction * pass.out.leaf_loss.mean();
    if (request.log) report.pending.push_back({"loss/leaf_classifier", pass.out.leaf_loss.mean().detach()});
  }
  if (request.log) {
    for (const auto& [name, value] : estimator_.diagnostics()) report.pending.push_back({name, value.detach()});
    if (!capturing_) read_terms(report, pass.share);  // a captured step's are read after its replay
  }
  return total;
}

void TrainStep::read_terms(StepReport& report, const BatchShare& share) {
  for (const auto& m : read_metrics(report.pending)) report.terms.push_back(m);
  report.pending.clear();
  if (comm_ != nullptr) {  // the whole batch's means
    std::vector<double> values;
    for (const auto& t : report.terms) values.push_back(t.value * share.fraction);
    values = comm_->sum(values);
    for (size_t i = 0; i < report.terms.size(); ++i) report.terms[i].value = values[i];
  }
}

void TrainStep::backward(const torch::Tensor& total) {
  RECORD_FUNCTION("htm::backward", {});
  if (reducer_) {
    reducer_->backward(total);  // each parameter's gradient as soon as it is whole, for the reducer
    return;
  }
  backend_for(total).before_backward(total);  // the gpu backend sums shared gradients in rounds
  total.backward();
}

void TrainStep::update(const StepRequest& request, StepReport& report) {
  RECORD_FUNCTION("htm::optimizer", {});
  if (request.log) {  // per-block gradient norms, before clipping: where the signal reaches
    std::vector<std::string> names;
    std::vector<torch::Tensor> norms;  // each block's, read at once
    for (const auto& child : ex_.model->named_children()) {
      const auto params = child.value()->parameters();
      if (params.empty()) continue;
      std::vector<torch::Tensor> grads;
      for (const auto& p : params)
        if (p.grad().defined()) grads.push_back(p.grad());
      names.push_back("grad_norm/" + child.key());
      norms.push_back(grads.empty() ? torch::zeros({}, params[0].options())
                                    : torch::stack(at::_foreach_norm(grads)).norm());  // one launch for the block
    }
    if (!norms.empty()) {
      const auto host = torch::stack(norms).to(torch::kDouble).cpu();  // host: a logged step's one read of them
      for (size_t k = 0; k < names.size(); ++k) report.terms.push_back({names[k], host[k].item<double>()});
    }
  }
  const double clip = ex_.config.settings.train.grad_clip;
  if (clip > 0) {
    const auto params = ex_.model->parameters();
    if (!params.empty()) backend_for(params[0]).clip_gradients(params, clip);  // gpu: nothing read back
  }
  optimizer_.step();
  policy_optimizer_.step();
}

}  // namespace htm
