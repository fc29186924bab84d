// The host's own settings ([experiment], [model], [train], [estimator], [runtime]), parsed once
// into typed structs. The schema below is their one home: names, types, defaults, the words a
// choice accepts and the text `docs/experiments.md` shows. Nothing outside config/ looks a
// setting up by its name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "htm/manifest.h"
#include "htm/value.h"

namespace htm {

enum class Task { reconstruct, classify };
/// estimator.log_prob: which log-probability policies report (htm::LogProbForm in htm/policy.h,
/// which the model asks for): exact (each draw renormalised over what is still allowed) or the
/// paper's unconstrained softmax.
enum class EstimatorLogProb { exact, paper };
/// runtime.precision: of the SDK's matrix products (kernels/precision.h).
enum class RuntimePrecision { fp32, bf16 };
/// runtime.kernels: the SDK's kernels (kernels/kernels.h).
enum class RuntimeKernels { native, portable, gpu };
/// runtime.cuda_graph: the training step replayed as a CUDA graph (train/step_graph.h).
enum class RuntimeCudaGraph { off, on, eager };
/// runtime.recompute: what backward computes again instead of keeping (model/blocks.h).
enum class RuntimeRecompute { off, mlp, blocks };
enum class Architecture { htm, vit };
enum class Unmerge { policy, mirror };
enum class LrDecay { step, cosine };
enum class RhoSchedule { epoch, step };
enum class EstimatorMethod { score_function, prob_scale };
enum class RewardScope { batch, sample };
enum class RewardBaseline { none, ema, rloo, value, policy };

struct ExperimentSettings {
  std::string name;  ///< results are filed under it; the file's stem when the file names none
  std::string description;
  std::vector<int64_t> seeds;          ///< exploration: where variants are tried and chosen
  std::vector<int64_t> confirm_seeds;  ///< confirmation: only `htm run --confirm` runs them
};

struct ModelSettings {
  int64_t dim = 0;  ///< token width C
  int64_t heads = 0;
  double dropout = 0;
  int64_t mlp_ratio = 0;
  std::vector<int64_t> schedule;  ///< pairs merged per layer; empty: from merge_fraction
  double merge_fraction = 0;
  int64_t layers = 0;
  bool transformer = false;
  bool cross_attention = false;
  Task task = Task::reconstruct;
  Architecture architecture = Architecture::htm;
  bool leaf_classifier = false;
  double timestep_scale = 0;
  Unmerge unmerge = Unmerge::policy;
  int64_t vit_dim = 0;  ///< 0: matched to the htm classifier's parameter count
};

struct TrainSettings {
  int64_t epochs = 0;
  int64_t batch_size = 0;
  double lr = 0;
  double weight_decay = 0;
  int64_t warmup_steps = 0;
  LrDecay lr_schedule = LrDecay::step;
  std::vector<int64_t> lr_decay_epochs;
  double lr_decay_factor = 0;
  double rho0 = 0;
  double rho_step = 0;
  RhoSchedule rho_schedule = RhoSchedule::epoch;
  double rho_end = 0;
  double rho_ramp = 0;
  bool stochastic_depth = false;
  int64_t max_steps = 0;      ///< 0: no cap
  int64_t train_samples = 0;  ///< 0: all
  int64_t eval_samples = 0;   ///< 0: all
  int64_t eval_every = 0;     ///< 0: only at each epoch's end
  int64_t log_every = 0;
  int64_t eval_batch_size = 0;
  double grad_clip = 0;  ///< 0: off
  int64_t images = 0;
  bool checkpoint = false;
  std::vector<std::string> eval_policies;  ///< also evaluate the same weights under these policies
  double anytime = 0;                      ///< weight of the intermediate populations' reconstruction loss; 0: off
  bool eval_greedy = false;                ///< evaluate with greedy merges; the sampled evaluation as sampled/…
};

struct EstimatorSettings {
  EstimatorMethod method = EstimatorMethod::score_function;
  EstimatorLogProb log_prob = EstimatorLogProb::exact;
  RewardScope reward = RewardScope::sample;
  RewardBaseline baseline = RewardBaseline::ema;
  double baseline_decay = 0;
  std::string baseline_policy;   ///< baseline = policy: the policy plugin whose pass on the same input is the reference
  int64_t rollouts = 1;          ///< draws of each input's decisions per step (rloo needs ≥ 2)
  double entropy = 0;            ///< weight of the entropy bonus on the merge distributions
  double dense = 0;              ///< weight of the dense per-merge reward (each pair's local unmerge error)
  int64_t replay = 0;            ///< rows of an earlier step's draw replayed each step (0: no replay)
  int64_t replay_capacity = 64;  ///< steps' draws kept for replay
  double replay_clip = 2;        ///< importance weights are truncated at this value
  double logit_bound = 0;        ///< merge-pair logits read as c·tanh(l/c); 0: unbounded
  double policy_lr = 0;          ///< 0: the policy trains at train.lr, in the model's optimiser
};

/// The results database when neither a file nor a command line names one.
inline constexpr const char* kDefaultResultsPath = "results/htm.sqlite";
/// runtime.stall_timeout's default: the watchdog's limit also before a run has read its config.
inline constexpr int64_t kDefaultStallTimeout = 300;

struct RuntimeSettings {
  int64_t threads = 0;                                  ///< 0: OMP_NUM_THREADS, else every core
  RuntimePrecision precision = RuntimePrecision::fp32;  ///< of the SDK's matrix products (kernels/precision.h)
  std::string device = "cpu";                           ///< "cpu", "cuda" or "cuda:N" (train/device.h)
  RuntimeKernels kernels = RuntimeKernels::native;      ///< native where built and on the CPU
  RuntimeCudaGraph cuda_graph = RuntimeCudaGraph::off;  ///< on: the step captured once per shape, then replayed
  int64_t graph_rounds =
      0;  ///< a captured pair sampler's rounds at most; 0: ⌊T/2⌋ (kernels/graph_draws.h graph_rounds())
  RuntimeRecompute recompute = RuntimeRecompute::off;  ///< mlp / blocks: their activations made again in backward
  std::string results;
  std::string artifacts;
  int64_t checkpoint_every = 0;                  ///< steps between checkpoints besides each epoch's end; 0: none
  double checkpoint_minutes = 0;                 ///< minutes between checkpoints; 0: none
  int64_t pictures_every = 0;                    ///< epochs between pictures besides the run's end; 0: none
  int64_t stall_timeout = kDefaultStallTimeout;  ///< seconds without progress before the watchdog stops a run; 0: none
  int64_t stop_grace = 30;  ///< seconds a stopped run gets to reach a step boundary before it is killed
};

struct HostSettings {
  ExperimentSettings experiment;
  ModelSettings model;
  TrainSettings train;
  EstimatorSettings estimator;
  RuntimeSettings runtime;
};

/// What a value of the right type must also satisfy: empty when it does, else what was
/// expected ("at least 1", "in [0, 1]").
using RangeCheck = std::function<std::string(const Value&)>;
/// A finite real in [low, high] (high may be infinite); `open_low` excludes low itself.
RangeCheck real_in(double low, double high, bool open_low = false);

/// One host setting: what a file may write, and where its checked value lands.
struct HostSetting {
  ParamSpec spec;                                           ///< name, type, default and description
  std::vector<std::string> choices;                         ///< the words a string setting accepts; empty: any text
  std::function<void(HostSettings&, const Value&)> assign;  ///< stores a checked value
  RangeCheck range;                                         ///< empty: any value of the type
  /// Added after runs were recorded: at its default it is left out of a run's identity (its
  /// config hash), so the runs that never used it keep the hashes they were recorded with.
  bool later = false;
};

struct HostSection {
  std::string name;
  std::vector<HostSetting> settings;
};

/// Every host setting, section by section, in the order documents list them.
const std::vector<HostSection>& host_schema();

/// The typed settings of flattened, checked values ("train.lr" -> 0.0001); every key of the
/// schema must be present.
HostSettings typed_settings(const std::map<std::string, Value>& values);

/// Every setting at its default.
HostSettings default_settings();

/// A rule spanning several settings, broken: the sentence, and the keys of the section it
/// concerns, the one to point at first (a file's position is reported at the first it wrote).
struct SettingProblem {
  std::string message;
  std::vector<std::string> keys;
};

/// The cross-setting rules of [estimator], in their one home: the config reports a broken one
/// at the file's line (experiment_config.cpp), and the Estimator refuses settings built in code.
/// Empty when the settings keep every rule.
std::vector<SettingProblem> estimator_problems(const EstimatorSettings& estimator);

}  // namespace htm
