// The host settings' schema, each entry bound to the struct member it fills.
#include "config/settings.h"

#include <cmath>
#include <limits>
#include <utility>

#include "config/device.h"
#include "config/toml_tree.h"
#include "htm/error.h"

namespace htm {
namespace {

template <class T>
constexpr ValueType value_type() {
  if constexpr (std::is_same_v<T, int64_t>)
    return ValueType::integer;
  else if constexpr (std::is_same_v<T, double>)
    return ValueType::floating;
  else if constexpr (std::is_same_v<T, bool>)
    return ValueType::boolean;
  else if constexpr (std::is_same_v<T, std::string>)
    return ValueType::string;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>)
    return ValueType::string_list;
  else {
    static_assert(std::is_same_v<T, std::vector<int64_t>>, "a host setting is a scalar or a list");
    return ValueType::integer_list;
  }
}

// Builds one section's entries, each writing into `section` of HostSettings.
template <class S>
class Section {
 public:
  Section(std::string name, S HostSettings::*section) : out_{std::move(name), {}}, section_(section) {}

  template <class T>
  Section& add(const char* key, T S::*member, T default_value, const char* description, RangeCheck range = {}) {
    auto section = section_;
    out_.settings.push_back(
        {{key, value_type<T>(), std::move(default_value), description},
         {},
         [section, member](HostSettings& s, const Value& v) { s.*section.*member = std::get<T>(v); },
         std::move(range)});
    return *this;
  }

  /// A setting spelled as one of `words`, stored as the matching enum value.
  template <class E>
  Section& choice(const char* key, E S::*member, std::vector<std::pair<std::string, E>> words,
                  const char* description) {
    auto section = section_;
    std::vector<std::string> names;
    for (const auto& word : words) names.push_back(word.first);
    out_.settings.push_back({{key, ValueType::string, names.front(), description},
                             names,
                             [section, member, words](HostSettings& s, const Value& v) {
                               for (const auto& [word, value] : words)
                                 if (word == std::get<std::string>(v)) s.*section.*member = value;
                             }});
    return *this;
  }

  /// Marks the setting just added as added after runs were recorded (HostSetting::later).
  Section& later() {
    out_.settings.back().later = true;
    return *this;
  }

  HostSection done() { return std::move(out_); }

 private:
  HostSection out_;
  S HostSettings::*section_;
};

using Ints = std::vector<int64_t>;
using Text = std::string;
using Words = std::vector<std::string>;

// The ranges settings are checked against when an experiment is resolved.
RangeCheck at_least(int64_t low) {
  return [low](const Value& v) -> std::string {
    if (const auto* list = std::get_if<Ints>(&v)) {
      for (int64_t x : *list)
        if (x < low) return "entries of at least " + std::to_string(low);
      return {};
    }
    return std::get<int64_t>(v) >= low ? std::string() : "at least " + std::to_string(low);
  };
}

RangeCheck finite() {
  return [](const Value& v) {
    return std::isfinite(std::get<double>(v)) ? std::string() : std::string("a finite number");
  };
}

// runtime.device: "cpu", or "cuda" / "cuda:N" where the linked libtorch has CUDA and sees the GPU.
RangeCheck a_device() {
  return [](const Value& v) -> std::string { return device_usable(std::get<std::string>(v)); };
}

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<HostSection> build_schema() {
  using E = ExperimentSettings;
  using M = ModelSettings;
  using Tr = TrainSettings;
  using Es = EstimatorSettings;
  using R = RuntimeSettings;
  std::vector<HostSection> schema;
  schema.push_back(
      Section<E>("experiment", &HostSettings::experiment)
          .add("name", &E::name, Text(), "name results are filed under; empty: the file's name without .toml")
          .add("description", &E::description, Text(), "one line saying what the experiment asks")
          .add("seeds", &E::seeds, Ints{0}, "exploration seeds: every variant runs once per seed", at_least(0))
          .add("confirm_seeds", &E::confirm_seeds, Ints{1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009},
               "confirmation seeds, disjoint from seeds: only `htm run --confirm --variant V` runs them (tagged "
               "phase=confirm), and refuses those whose data an earlier run drew unless given `--reuse-seeds` (the "
               "seed ledger, `docs/statistics.md`)",
               at_least(0))
          .done());
  schema.push_back(
      Section<M>("model", &HostSettings::model)
          .add("dim", &M::dim, int64_t{256}, "token width C", at_least(1))
          .add("heads", &M::heads, int64_t{8}, "attention heads h", at_least(1))
          .add("dropout", &M::dropout, 0.1, "dropout rate", real_in(0, 1))
          .add("mlp_ratio", &M::mlp_ratio, int64_t{4}, "MLP hidden width as a multiple of dim", at_least(1))
          .add("schedule", &M::schedule, Ints{},
               "pairs merged at each layer (0: a layer that merges nothing); empty: derived from merge_fraction",
               at_least(0))
          .add("merge_fraction", &M::merge_fraction, 1.0,
               "fraction of tokens merged per layer: r_l = floor(f * T_l / 2)", real_in(0, 1))
          .add("layers", &M::layers, int64_t{8}, "merging layers L, in the encoder and in the decoder", at_least(1))
          .add("transformer", &M::transformer, true, "transformer blocks around merging and unmerging (§4.4)")
          .add("cross_attention", &M::cross_attention, true,
               "cross-attention from merged tokens to the unmerged ones (§4.4)")
          .choice("task", &M::task, {{"reconstruct", Task::reconstruct}, {"classify", Task::classify}},
                  "reconstruct (autoencoder), or classify (encoder only, root token into a linear head, §4.1)")
          .choice("architecture", &M::architecture, {{"htm", Architecture::htm}, {"vit", Architecture::vit}},
                  "htm, or vit: the §4.1 baseline (lifted tokens through `layers` untied transformer blocks)")
          .add("leaf_classifier", &M::leaf_classifier, false,
               "train the slides' leaf/internal token classifier (two logits per token), used by `htm sample`")
          .add("timestep_scale", &M::timestep_scale, 1.0,
               "multiplies the depth signal added to every token entering a layer (eq. 7; 1: the paper)", finite())
          .choice("unmerge", &M::unmerge, {{"policy", Unmerge::policy}, {"mirror", Unmerge::mirror}},
                  "which tokens the decoder splits: policy (the paper: the unmerge policy chooses) or mirror "
                  "(the ones the encoder merged, in reverse; the tree's merge flags become part of the code)")
          .add("vit_dim", &M::vit_dim, int64_t{0},
               "width of the vit; 0: the width whose parameter count is closest to the htm classifier's", at_least(0))
          .done());
  schema.push_back(
      Section<Tr>("train", &HostSettings::train)
          .add("epochs", &Tr::epochs, int64_t{1}, "passes over the training set", at_least(1))
          .add("batch_size", &Tr::batch_size, int64_t{256}, "samples per step", at_least(1))
          .add("lr", &Tr::lr, 1e-4, "AdamW learning rate", real_in(0, kInf, true))
          .add("weight_decay", &Tr::weight_decay, 0.01, "AdamW weight decay", real_in(0, kInf))
          .add("warmup_steps", &Tr::warmup_steps, int64_t{0},
               "steps over which the learning rate rises linearly from 0", at_least(0))
          .choice("lr_schedule", &Tr::lr_schedule, {{"step", LrDecay::step}, {"cosine", LrDecay::cosine}},
                  "step (the paper: multiplied down at lr_decay_epochs) or cosine (to 0 at the last step)")
          .add("lr_decay_epochs", &Tr::lr_decay_epochs, Ints{}, "epochs at which the learning rate is multiplied down",
               at_least(1))
          .add("lr_decay_factor", &Tr::lr_decay_factor, 0.1,
               "what the learning rate is multiplied by at each decay epoch", real_in(0, kInf, true))
          .add("rho0", &Tr::rho0, 0.05, "initial rho of the stochastic schedule, P(depth d) ~ rho^d (§3.1.4)",
               real_in(0, kInf, true))
          .add("rho_step", &Tr::rho_step, 0.01, "added to rho after each epoch, up to 1", finite())
          .choice("rho_schedule", &Tr::rho_schedule, {{"epoch", RhoSchedule::epoch}, {"step", RhoSchedule::step}},
                  "epoch (the paper: rho0 + rho_step per epoch) or step (rho0 rising linearly to rho_end over "
                  "the first rho_ramp of the steps)")
          .add("rho_end", &Tr::rho_end, 1.0, "rho reached by a step-wise ramp; above 1 favours the full depth",
               real_in(0, kInf, true))
          .add("rho_ramp", &Tr::rho_ramp, 0.5, "fraction of the steps over which a step-wise ramp rises", real_in(0, 1))
          .add("stochastic_depth", &Tr::stochastic_depth, true,
               "draw each step's depth from the rho schedule (§3.1.4); false: always the full schedule")
          .add("max_steps", &Tr::max_steps, int64_t{0}, "stop after this many steps; 0: no cap", at_least(0))
          .add("train_samples", &Tr::train_samples, int64_t{0}, "training samples used; 0: all", at_least(0))
          .add("eval_samples", &Tr::eval_samples, int64_t{0}, "evaluation samples used; 0: all", at_least(0))
          .add("eval_every", &Tr::eval_every, int64_t{0}, "also evaluate every N steps; 0: only at each epoch's end",
               at_least(0))
          .add("log_every", &Tr::log_every, int64_t{10}, "record training metrics every N steps", at_least(1))
          .add("eval_batch_size", &Tr::eval_batch_size, int64_t{256}, "samples per evaluation batch", at_least(1))
          .add("grad_clip", &Tr::grad_clip, 0.0, "clip the gradient norm to this; 0: off", real_in(0, kInf))
          .add("images", &Tr::images, int64_t{8}, "samples shown in the reconstruction picture", at_least(0))
          .add("checkpoint", &Tr::checkpoint, true, "save a checkpoint with the run")
          .add("eval_policies", &Tr::eval_policies, Words{},
               "also evaluate the trained weights with each of these policy plugins in place of the "
               "trained one (at their defaults), logged as under/<policy>/<metric>: e.g. [\"random\", \"oracle\"]")
          .add("anytime", &Tr::anytime, 0.0,
               "weight w of a multi-resolution (anytime) loss: training also reconstructs the input from the "
               "population after each encoder layer d < D (decoder layers d..1) and the loss, which is also "
               "the policy's reward, becomes loss_D + w * mean_d loss_d; 0: off",
               real_in(0, kInf))
          .later()
          .add("eval_greedy", &Tr::eval_greedy, false,
               "evaluate with each policy's greedy merges (the best pairs of its merge_logits(), no draw; "
               "a policy without logits, or with all logits equal as random, still draws) and log the sampled "
               "evaluation beside it as sampled/<metric>")
          .later()
          .done());
  schema.push_back(
      Section<Es>("estimator", &HostSettings::estimator)
          .choice("method", &Es::method,
                  {{"score_function", EstimatorMethod::score_function}, {"prob_scale", EstimatorMethod::prob_scale}},
                  "gradient through the merges: score_function (eq. 2-4) or prob_scale (A.4)")
          .choice("log_prob", &Es::log_prob, {{"exact", EstimatorLogProb::exact}, {"paper", EstimatorLogProb::paper}},
                  "log-probability of the sampled decisions: exact (each draw renormalised over what is "
                  "still allowed: unbiased) or paper (the unconstrained softmax, §3.1.5: biased)")
          .choice("reward", &Es::reward, {{"sample", RewardScope::sample}, {"batch", RewardScope::batch}},
                  "score-function reward: each sample's loss, or the batch's (the paper)")
          .choice("baseline", &Es::baseline,
                  {{"ema", RewardBaseline::ema},
                   {"none", RewardBaseline::none},
                   {"rloo", RewardBaseline::rloo},
                   {"value", RewardBaseline::value},
                   {"policy", RewardBaseline::policy}},
                  "subtracted from the reward: ema (moving average of the loss), none (the paper), rloo "
                  "(the mean loss of the same input's other rollouts; needs rollouts >= 2), value (a "
                  "learned prediction of each sample's loss from the population each layer draws from), or "
                  "policy (self-critical: the loss of the same input under baseline_policy's merges)")
          .add("baseline_decay", &Es::baseline_decay, 0.9, "decay of the ema baseline", real_in(0, 1))
          .add("baseline_policy", &Es::baseline_policy, Text(""),
               "with baseline = \"policy\": the policy plugin (at its defaults) whose merges, drawn in a pass "
               "without gradients on the same inputs with the same weights, give each sample's reference loss, "
               "e.g. \"nearest\"")
          .later()
          .add("rollouts", &Es::rollouts, int64_t{1},
               "decisions drawn for each input per step (the batch is repeated this many times)", at_least(1))
          .add("entropy", &Es::entropy, 0.0,
               "weight of an entropy bonus on each layer's merge distribution (first draw)", real_in(0, kInf))
          .add("dense", &Es::dense, 0.0,
               "weight of a dense per-merge reward: each merged pair's local reconstruction error (the merge "
               "operator's unmerge of the merged token against the pair), credited to the draws of its layer "
               "up to it; 0: none",
               real_in(0, kInf))
          .later()
          .add("replay", &Es::replay, int64_t{0},
               "rows of an earlier step's draw replayed each step (the slides' importance sampling from replay "
               "buffers): the same inputs and merges, scored by today's policy and model, weighted by "
               "p_now / p_then; 0: none",
               at_least(0))
          .later()
          .add("replay_capacity", &Es::replay_capacity, int64_t{64}, "steps' draws kept for replay", at_least(1))
          .later()
          .add("replay_clip", &Es::replay_clip, 2.0, "replay's importance weights are truncated at this value",
               real_in(0, kInf, true))
          .later()
          .add("logit_bound", &Es::logit_bound, 0.0,
               "bound c on the merge policy's pair logits: the SDK's pair sampler, log-probability and "
               "entropy read each logit l as c * tanh(l / c), so the policy cannot become deterministic "
               "and its score function's gradient fades near the bound; 0: unbounded",
               real_in(0, kInf))
          .later()
          .add("policy_lr", &Es::policy_lr, 0.0,
               "learning rate of the policy's own AdamW (it follows train.lr's schedule); 0: one optimiser at train.lr",
               real_in(0, kInf))
          .done());
  schema.push_back(
      Section<R>("runtime", &HostSettings::runtime)
          .add("threads", &R::threads, int64_t{0}, "torch threads; 0: OMP_NUM_THREADS if set, else all cores",
               at_least(0))
          .choice("precision", &R::precision, {{"fp32", RuntimePrecision::fp32}, {"bf16", RuntimePrecision::bf16}},
                  "of the linear layers' and attention's matrix products: fp32, or bf16 operands with fp32 "
                  "accumulation (weights, optimiser and everything else stay fp32; fp32 where the CPU has no "
                  "bf16 instructions)")
          .later()
          .add("device", &R::device, Text("cpu"),
               "where tensors live and kernels run: \"cpu\", \"cuda\" (a data-parallel rank takes "
               "cuda:<its local rank>) or \"cuda:N\"; cuda needs a libtorch built with CUDA (docs/gpu.md)",
               a_device())
          .later()
          .choice("kernels", &R::kernels,
                  {{"native", RuntimeKernels::native},
                   {"portable", RuntimeKernels::portable},
                   {"gpu", RuntimeKernels::gpu}},
                  "the SDK's kernels: native (oneDNN GEMMs, AVX-512 rows; CPU tensors, where the build has them) "
                  "and the GPU kernels (kernels/gpu.h) on a GPU, portable (the reference: plain torch ops on any "
                  "device), or gpu (the GPU kernels on any device: to count or test the GPU path on a CPU)")
          .later()
          .choice("cuda_graph", &R::cuda_graph,
                  {{"off", RuntimeCudaGraph::off}, {"on", RuntimeCudaGraph::on}, {"eager", RuntimeCudaGraph::eager}},
                  "on: a training step and an evaluation batch on a GPU are captured once per shape as CUDA "
                  "graphs and replayed (one launch instead of thousands; their draws from the device's "
                  "generator seeded once a step or batch); "
                  "eager: the same draws without the graph (to check a graph against); off: neither "
                  "(docs/gpu.md)")
          .later()
          .add("graph_rounds", &R::graph_rounds, int64_t{0},
               "the rounds a captured pair sampler runs at most (0: floor(T/2), which always finish the "
               "matching; a trained policy needs about that many); fewer are quicker where the policy's "
               "logits are near random, and a step whose matching needs more is done again eagerly (docs/gpu.md)",
               at_least(0))
          .later()
          .choice(
              "recompute", &R::recompute,
              {{"off", RuntimeRecompute::off}, {"mlp", RuntimeRecompute::mlp}, {"blocks", RuntimeRecompute::blocks}},
              "mlp: each MLP keeps only its input for backward, which computes its hidden activation again "
              "(nothing drawn: combines with runtime.cuda_graph at any dropout; fc1's product runs twice); "
              "blocks: the transformer and refinement blocks keep only their inputs for backward, which runs "
              "each again with the same dropout masks (less memory still; each block's forward runs twice); "
              "off: every activation kept (docs/performance.md)")
          .later()
          .add("results", &R::results, Text(kDefaultResultsPath), "the results database")
          .add("artifacts", &R::artifacts, Text("results/runs"), "folder of per-run checkpoints and images")
          .add("checkpoint_every", &R::checkpoint_every, int64_t{0},
               "steps between checkpoints, besides the one at each epoch's end (0: none); a killed run "
               "resumes from its last checkpoint",
               at_least(0))
          .add("checkpoint_minutes", &R::checkpoint_minutes, 10.0,
               "minutes between checkpoints (0: none): at most this much work is lost to a kill", real_in(0, kInf))
          .add("pictures_every", &R::pictures_every, int64_t{0},
               "epochs between pictures (reconstructions, policy diagram, policy heatmap), besides those at the "
               "run's end (0: none); each is kept, and htm serve's pages step through them",
               at_least(0))
          .add("stall_timeout", &R::stall_timeout, kDefaultStallTimeout,
               "seconds a run (or a data-parallel rank) may go without progress (a step, a plugin call, an "
               "evaluation batch) before its supervisor's watchdog fails it, naming the rank, step and call, and "
               "stops its processes; never less than 10 times the slowest step so far; 0: no watchdog "
               "(docs/reliability.md)",
               at_least(0))
          .add("stop_grace", &R::stop_grace, int64_t{30},
               "seconds a run stopped by SIGINT or SIGTERM gets to reach a step boundary and record itself "
               "interrupted before it is killed (and recorded interrupted by its supervisor)",
               at_least(0))
          .done());
  return schema;
}

}  // namespace

RangeCheck real_in(double low, double high, bool open_low) {
  return [=](const Value& v) -> std::string {
    const double x = std::get<double>(v);
    const bool ok = std::isfinite(x) && (open_low ? x > low : x >= low) && x <= high;
    if (ok) return {};
    const std::string from = to_toml(Value(low));
    if (std::isinf(high)) return std::string("a finite number ") + (open_low ? "above " : "of at least ") + from;
    return std::string("a number in ") + (open_low ? "(" : "[") + from + ", " + to_toml(Value(high)) + "]";
  };
}

const std::vector<HostSection>& host_schema() {
  static const std::vector<HostSection> schema = build_schema();
  return schema;
}

HostSettings typed_settings(const std::map<std::string, Value>& values) {
  HostSettings settings;
  for (const HostSection& section : host_schema()) {
    for (const HostSetting& setting : section.settings) {
      const std::string key = section.name + "." + setting.spec.name;
      auto found = values.find(key);
      if (found == values.end()) throw Error("the config has no setting '" + key + "'");
      if (type_of(found->second) != setting.spec.type)
        throw Error("setting '" + key + "' is " + config::with_article(type_name(type_of(found->second))) + ", not " +
                    config::with_article(type_name(setting.spec.type)));
      setting.assign(settings, found->second);
    }
  }
  return settings;
}

HostSettings default_settings() {
  std::map<std::string, Value> values;
  for (const HostSection& section : host_schema())
    for (const HostSetting& setting : section.settings)
      values[section.name + "." + setting.spec.name] = setting.spec.default_value;
  return typed_settings(values);
}

std::vector<SettingProblem> estimator_problems(const EstimatorSettings& estimator) {
  std::vector<SettingProblem> problems;
  if ((estimator.baseline == RewardBaseline::value || estimator.dense > 0) &&
      estimator.method == EstimatorMethod::prob_scale)
    problems.push_back({std::string(estimator.dense > 0 ? "'estimator.dense'" : "'estimator.baseline' = \"value\"") +
                            " shapes the score function's reward: 'estimator.method' = \"prob_scale\" has none",
                        {estimator.dense > 0 ? "dense" : "baseline"}});
  if ((estimator.baseline == RewardBaseline::policy) != !estimator.baseline_policy.empty())
    problems.push_back({estimator.baseline_policy.empty()
                            ? "'estimator.baseline' = \"policy\" compares each sample with the same input under "
                              "another policy: name it in 'estimator.baseline_policy' (e.g. \"nearest\")"
                            : "'estimator.baseline_policy' is the reference of 'estimator.baseline' = \"policy\", "
                              "which is not set",
                        {"baseline_policy", "baseline"}});
  if (estimator.baseline == RewardBaseline::policy && estimator.method == EstimatorMethod::prob_scale)
    problems.push_back(
        {"'estimator.baseline' = \"policy\" shapes the score function's reward: "
         "'estimator.method' = \"prob_scale\" has none",
         {"baseline"}});
  if (estimator.baseline == RewardBaseline::rloo && estimator.rollouts < 2)
    problems.push_back(
        {"'estimator.baseline' = \"rloo\" compares each rollout with the same input's others: set "
         "'estimator.rollouts' to at least 2 (it is " +
             std::to_string(estimator.rollouts) + ")",
         {"rollouts", "baseline"}});
  return problems;
}

}  // namespace htm
