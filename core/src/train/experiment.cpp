#include "train/experiment.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include <torch/torch.h>

#include "config/device.h"
#include "htm/adapter.h"
#include "htm/error.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "kernels/fused_linear.h"
#include "kernels/graph_draws.h"
#include "kernels/kernels.h"
#include "kernels/precision.h"
#include "model/vit.h"

namespace htm {

int64_t usable_cores() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(omp, &end, 10);
    if (end != omp && *end == '\0' && n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

void set_threads(int64_t threads) { at::set_num_threads(static_cast<int>(threads > 0 ? threads : usable_cores())); }

void use_kernels(RuntimeKernels kernels, RuntimeRecompute recompute) {
  set_recompute_mlps(recompute == RuntimeRecompute::mlp);
  switch (kernels) {
    case RuntimeKernels::native:
      set_kernels(Kernels::native);
      return;
    case RuntimeKernels::portable:
      set_kernels(Kernels::portable);
      return;
    case RuntimeKernels::gpu:
      set_kernels(Kernels::gpu);
      return;
  }
}

RuntimePrecision set_precision(RuntimePrecision asked, const std::string& device) {
  RuntimePrecision used = asked;
  if (asked == RuntimePrecision::bf16 && device == "cpu" && !cpu_has_bf16()) {
    static std::once_flag said;
    std::call_once(said, [] {
      std::fprintf(stderr,
                   "note: runtime.precision = \"bf16\", but oneDNN finds no AVX512-BF16 or AMX-BF16 here (it "
                   "would emulate bf16, slower than fp32): running fp32\n");
    });
    used = RuntimePrecision::fp32;
  }
  set_matmul_precision(used == RuntimePrecision::bf16 ? Precision::bf16 : Precision::fp32);
  return used;
}

RuntimePrecision use_runtime(const RuntimeSettings& runtime, int64_t threads) {
  set_threads(threads);
  use_kernels(runtime.kernels, runtime.recompute);
  set_graph_rounds_cap(runtime.graph_rounds);
  return set_precision(runtime.precision, runtime.device);
}

namespace {

ModelOptions model_options(const ResolvedConfig& config, const BuildContext& ctx) {
  ModelOptions options;
  options.dim = ctx.dim;
  options.heads = ctx.heads;
  options.mlp_ratio = ctx.mlp_ratio;
  options.dropout = ctx.dropout;
  options.mixing = config.settings.model.transformer ? Mixing::transformer : Mixing::none;
  options.refinement = config.settings.model.cross_attention ? Refinement::cross_attention : Refinement::mlp;
  // A.4's estimator is the architecture's: merged outputs scaled by their selection probability.
  options.merged_scale =
      config.settings.estimator.method == EstimatorMethod::prob_scale ? MergedScale::probability : MergedScale::none;
  if (config.settings.model.task == Task::classify) options.classes = ctx.num_classes;
  options.leaf_classifier = config.settings.model.leaf_classifier ? LeafClassifier::trained : LeafClassifier::none;
  options.timestep_scale = config.settings.model.timestep_scale;
  options.unmerge = config.settings.model.unmerge == Unmerge::mirror ? UnmergeChoice::mirror : UnmergeChoice::policy;
  options.log_prob_form =
      config.settings.estimator.log_prob == EstimatorLogProb::paper ? LogProbForm::paper : LogProbForm::exact;
  options.logit_bound = config.settings.estimator.logit_bound;
  options.recompute_blocks = config.settings.runtime.recompute == RuntimeRecompute::blocks;
  options.entropy_gradients = config.settings.estimator.entropy > 0;
  return options;
}

void check_policy_fits(const Policy& policy, const std::string& name, const ModelOptions& options) {
  if (policy.needs_attention() && options.mixing != Mixing::transformer)
    throw Error("policy '" + name +
                "' reads the encoder transformer block's attention; "
                "set model.transformer = true");
  if (policy.needs_cross_keys() && options.refinement != Refinement::cross_attention)
    throw Error("policy '" + name +
                "' reads the merging block's cross-attention keys; "
                "set model.cross_attention = true");
}

// The HTM model of `config` at width ctx.dim, with its schedule, and with estimator.baseline =
// "value" the estimator's value heads, registered in the model as `value` (built right after the
// model's own modules: the same random stream as when the model built them itself).
std::shared_ptr<HtmModelImpl> build_htm(const ResolvedConfig& config, const PluginFactory& plugins,
                                        const BuildContext& ctx, std::vector<int64_t>& schedule,
                                        ValueHeads* values = nullptr) {
  auto adapter = plugins.create<Adapter>(PluginKind::adapter, config.adapter.name, config.adapter.params, ctx);
  auto policy = plugins.create<Policy>(PluginKind::policy, config.policy.name, config.policy.params, ctx);
  auto merge = plugins.create<MergeOperator>(PluginKind::merge, config.merge.name, config.merge.params, ctx);
  const int64_t tokens = adapter->num_tokens();
  schedule = config.settings.model.schedule;
  if (schedule.empty())
    schedule = make_schedule(tokens, config.settings.model.merge_fraction, config.settings.model.layers);
  check_schedule(tokens, schedule);
  ModelOptions options = model_options(config, ctx);
  check_policy_fits(*policy, config.policy.name, options);
  auto model = std::make_shared<HtmModelImpl>(options, adapter, policy, merge);
  if (config.settings.estimator.baseline == RewardBaseline::value) {
    auto heads = model->register_module("value", ValueHeads(options.dim));
    if (values != nullptr) *values = heads;
  }
  return model;
}

// What the value heads add to a pass's participating parameters: their predictions for every
// draw with log-probabilities (the heads' own regression trains them).
std::function<torch::Tensor(const ForwardResult&)> value_terms(const ValueHeads& values) {
  if (!values) return {};
  return [heads = ValueHeads(values)](const ForwardResult& out) mutable {
    torch::Tensor sum;
    for (const Draw& d : out.draws)
      if (d.log_prob.defined()) {
        auto v = heads->forward(d).sum();
        sum = sum.defined() ? sum + v : v;
      }
    return sum;
  };
}

std::shared_ptr<VitImpl> build_vit(const ResolvedConfig& config, const PluginFactory& plugins, BuildContext ctx,
                                   int64_t dim) {
  ctx.dim = dim;
  VitOptions options;
  options.block = model_options(config, ctx);
  options.layers = config.settings.model.layers;
  options.classes = ctx.num_classes;
  auto adapter = plugins.create<Adapter>(PluginKind::adapter, config.adapter.name, config.adapter.params, ctx);
  return std::make_shared<VitImpl>(options, adapter);
}

// §4.1 sizes the ViT to the HTM classifier's parameter count: the width (a multiple of 2·heads)
// whose count of participating parameters is closest.
int64_t matching_vit_dim(const ResolvedConfig& config, const PluginFactory& plugins, const BuildContext& ctx,
                         const torch::Tensor& probe) {
  std::vector<int64_t> schedule;
  ValueHeads values{nullptr};
  const int64_t target = participating_parameters(*build_htm(config, plugins, ctx, schedule, &values), probe, schedule,
                                                  {}, value_terms(values));
  const int64_t step = 2 * ctx.heads;
  auto count = [&](int64_t dim) { return participating_parameters(*build_vit(config, plugins, ctx, dim), probe, {}); };
  int64_t lo = 1, hi = 1;  // in units of step; counts grow with the width
  while (count(hi * step) < target) hi *= 2;
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (count(mid * step) < target ? lo : hi) = mid;
  }
  return std::llabs(count(lo * step) - target) <= std::llabs(count(hi * step) - target) ? lo * step : hi * step;
}

}  // namespace

Batch on_device(Batch batch, const c10::Device& device) {
  for (torch::Tensor* t : {&batch.input, &batch.labels, &batch.tree}) {
    if (!t->defined()) continue;
    // To a GPU from pinned memory, queued without waiting: the host does not wait for the steps
    // still running there (the pinned block is not reused before its copy is done).
    const bool queued = !device.is_cpu() && t->device().is_cpu();
    *t = queued ? t->pin_memory().to(device, /*non_blocking=*/true) : t->to(device);
  }
  return batch;
}

Experiment assemble(const ResolvedConfig& config, const PluginFactory& plugins, int64_t seed, int local_rank) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  Experiment ex;
  ex.config = config;
  BuildContext ctx;
  const ModelSettings& model = config.settings.model;
  ctx.dim = model.dim;
  ctx.heads = model.heads;
  ctx.mlp_ratio = model.mlp_ratio;
  ctx.dropout = model.dropout;
  ctx.layers = model.layers;
  Params dataset_params = config.dataset.params;
  if (dataset_params.has(kRunSeedParam)) dataset_params.set(kRunSeedParam, Value(seed));  // its data follow the seed
  ex.dataset = plugins.create<Dataset>(PluginKind::dataset, config.dataset.name, dataset_params, ctx);
  ctx.sample_shape = ex.dataset->sample_shape();
  ctx.num_classes = ex.dataset->num_classes();

  const bool classify = model.task == Task::classify;
  const bool vit = model.architecture == Architecture::vit;
  if (classify && ctx.num_classes < 2)
    throw Error("model.task = \"classify\" needs a dataset with classes; '" + config.dataset.name + "' has none");
  if (vit && !classify) throw Error("model.architecture = \"vit\" is a classifier: set model.task = \"classify\"");
  const Batch probe_batch =
      ex.dataset->get(Split::train, torch::arange(std::min<int64_t>(2, ex.dataset->size(Split::train))));
  const torch::Tensor& probe = probe_batch.input;
  if (vit) {
    int64_t dim = model.vit_dim;
    if (dim == 0) dim = matching_vit_dim(config, plugins, ctx, probe);
    if (dim % ctx.heads != 0)
      throw Error("model.vit_dim (" + std::to_string(dim) + ") must be a multiple of model.heads");
    torch::manual_seed(static_cast<uint64_t>(seed));  // the search drew weights; start again
    ex.model = build_vit(config, plugins, ctx, dim);
    ex.schedule = {};
  } else {
    auto htm_model = build_htm(config, plugins, ctx, ex.schedule, &ex.values);
    if (!classify) ex.latent_floats = tokens_after(htm_model->num_tokens(), ex.schedule, ex.schedule.size()) * ctx.dim;
    ex.model = htm_model;
  }
  for (const auto& [name, choice] : config.losses) {
    auto loss = plugins.create<Loss>(PluginKind::loss, name, choice.params, ctx);
    ex.model->register_module("loss_" + name, loss);  // learnable loss parts train too
    ex.losses.push_back({name, choice.weight, loss});
  }
  ex.parameters = count_parameters(*ex.model);
  ex.participating = participating_parameters(*ex.model, probe, ex.schedule, probe_batch.tree, value_terms(ex.values));
  for (const PluginChoice& choice : config.eval_policies) {
    if (vit) throw Error("train.eval_policies needs the htm model: a vit has no policy to switch");
    auto policy = plugins.create<Policy>(PluginKind::policy, choice.name, choice.params, ctx);
    check_policy_fits(*policy, choice.name, model_options(config, ctx));
    ex.eval_policies.push_back({choice.name, policy});
  }
  if (config.baseline_policy) {
    const PluginChoice& choice = *config.baseline_policy;
    if (vit) throw Error("estimator.baseline = \"policy\" needs the htm model: a vit has no policy to switch");
    ex.baseline_policy = plugins.create<Policy>(PluginKind::policy, choice.name, choice.params, ctx);
    check_policy_fits(*ex.baseline_policy, choice.name, model_options(config, ctx));
  }
  ex.device = run_device(config.settings.runtime.device, local_rank);
  ex.model->to(ex.device);
  for (auto& [name, policy] : ex.eval_policies)
    if (auto* module = dynamic_cast<torch::nn::Module*>(policy.get())) module->to(ex.device);
  if (auto* module = dynamic_cast<torch::nn::Module*>(ex.baseline_policy.get())) module->to(ex.device);
  return ex;
}

}  // namespace htm
