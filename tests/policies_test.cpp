// Behaviour of the baseline policies: the distributions they claim, and the model feeding the
// heuristic its attention weights; what evaluation logs of a learned policy's own parameters.
#include <cmath>
#include <fstream>

#include <torch/torch.h>

#include "commands/runner.h"
#include "htm/policy.h"
#include "plugins_util.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"

namespace htm {
namespace {

std::shared_ptr<Policy> policy(const std::string& name) {
  BuildContext ctx;
  ctx.dim = 8;
  ctx.heads = 2;
  return htm::testing::plugins().create<Policy>(PluginKind::policy, name,
                                                htm::testing::plugins().default_params(PluginKind::policy, name), ctx);
}

// Histogram of the first merged pair (i*T + j) over n draws.
std::vector<double> first_pairs(Policy& p, const torch::Tensor& attention, int64_t n) {
  const int64_t T = attention.size(1);
  MergeContext ctx;
  ctx.tokens = torch::randn({n, T, 8});
  ctx.r = 1;
  ctx.attention = attention.expand({n, T, T}).contiguous();
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(3);
  auto d = p.choose_merges(ctx);
  auto counts = torch::bincount((d.src * T + d.dst).view(-1), {}, T * T).to(torch::kDouble);
  return std::vector<double>(counts.data_ptr<double>(), counts.data_ptr<double>() + T * T);
}

TEST(RandomPolicy, EveryPairIsEquallyLikely) {
  const int64_t T = 5, n = 60000;
  auto counts = first_pairs(*policy("random"), torch::rand({1, T, T}), n);
  std::vector<double> probs(T * T, 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (i != j) probs[i * T + j] = 1.0 / (T * (T - 1));
  auto [stat, df] = htm::testing::chi_square(counts, probs, n);
  EXPECT_LT(stat, htm::testing::chi_square_bound(df));
}

TEST(HeuristicPolicy, PairsAreDrawnInProportionToAttention) {
  const int64_t T = 4, n = 60000;
  torch::manual_seed(4);
  auto attention = torch::softmax(torch::randn({1, T, T}) * 2, -1);
  auto counts = first_pairs(*policy("heuristic"), attention, n);
  std::vector<double> probs(T * T, 0);
  double z = 0;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (i != j) z += attention[0][i][j].item<double>();
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (i != j) probs[i * T + j] = attention[0][i][j].item<double>() / z;
  auto [stat, df] = htm::testing::chi_square(counts, probs, n);
  EXPECT_LT(stat, htm::testing::chi_square_bound(df));
  // ... and not uniformly: the same check against uniform probabilities fails.
  std::vector<double> uniform(T * T, 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (i != j) uniform[i * T + j] = 1.0 / (T * (T - 1));
  EXPECT_GT(htm::testing::chi_square(counts, uniform, n).first, htm::testing::chi_square_bound(df));
}

TEST(HeuristicPolicy, TrainsInsideTheModelAndNeedsTheTransformerBlock) {
  const std::string dir = htm::testing::fresh_dir("heuristic");
  const std::string file = dir + "/h.toml";
  std::ofstream(file) << "[experiment]\nname = \"h\"\n[policy]\nplugin = \"heuristic\"\n"
                      << "[dataset]\nplugin = \"noise\"\nchannels = 1\nsize = 28\ntrain_size = 16\ntest_size = 8\n"
                      << "[adapter]\npatch = 7\nfourier_bands = 4\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 4\n"
                      << "[train]\nbatch_size = 8\ntrain_samples = 16\neval_samples = 8\nimages = 0\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\nartifacts = \"" << dir
                      << "/runs\"\n"
                      << "[variants.with_transformer]\n[variants.without_transformer]\nmodel.transformer = false\n";
  RunRequest request;
  request.file = file;
  request.variants = {"with_transformer"};
  EXPECT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  request.variants = {"without_transformer"};  // refused before anything is recorded
  try {
    run_experiment(request, htm::testing::plugins());
    FAIL() << "ran the heuristic policy without a transformer block";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("set model.transformer = true"));
  }
  ResultsStore store(dir + "/htm.sqlite");
  auto r = store.query("SELECT variant, status FROM runs");
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0][1], "finished");
}

TEST(SharedKeyPolicy, EstimatorTrainsQueriesButNeverTheSharedKeys) {
  auto p = policy("shared_key");
  MergeContext ctx;
  ctx.tokens = torch::randn({2, 6, 8});
  ctx.cross_keys = torch::randn({2, 6, 8}, torch::requires_grad());
  ctx.r = 2;
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  auto d = p->choose_merges(ctx);
  d.log_prob.sum().backward();
  EXPECT_FALSE(ctx.cross_keys.grad().defined());  // sg[K]: keys learn only in the cross-attention
  for (const auto& param : p->named_parameters())
    if (param.key().rfind("query", 0) == 0 || param.key() == "head_weight")
      EXPECT_TRUE(param.value().grad().defined()) << param.key();
  // The logits use the keys: other keys, other decisions.
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  auto lp_a = p->choose_merges(ctx).log_prob;
  ctx.cross_keys = torch::randn({2, 6, 8});
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_FALSE(torch::allclose(lp_a, p->choose_merges(ctx).log_prob));
}

TEST(SharedKeyPolicy, RunsInsideTheModelAndNeedsCrossAttention) {
  const std::string dir = htm::testing::fresh_dir("shared_key");
  const std::string file = dir + "/s.toml";
  std::ofstream(file) << "[experiment]\nname = \"s\"\n[policy]\nplugin = \"shared_key\"\n"
                      << "[dataset]\nplugin = \"noise\"\nchannels = 1\nsize = 28\ntrain_size = 16\ntest_size = 8\n"
                      << "[adapter]\npatch = 7\nfourier_bands = 4\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 4\n"
                      << "[train]\nbatch_size = 8\ntrain_samples = 16\neval_samples = 8\nimages = 0\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\nartifacts = \"" << dir
                      << "/runs\"\n";
  RunRequest request;
  request.file = file;
  EXPECT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  request.overrides = {"model.cross_attention=false"};
  EXPECT_THROW(run_experiment(request, htm::testing::plugins()), Error);
}

}  // namespace
}  // namespace htm

namespace htm {
namespace {

// The learned policy scores a pair from its two tokens alone; the self-attention policy from
// tokens that have attended to the whole population, so changing a third token changes it.
TEST(SelfAttentionPolicy, PairScoresDependOnTheOtherTokensAndTrainTheBlocks) {
  torch::manual_seed(7);
  MergeContext ctx;
  ctx.tokens = torch::randn({1, 6, 8});
  ctx.r = 1;
  auto changed = ctx;
  changed.tokens = ctx.tokens.clone();
  changed.tokens[0][5] += 3.0 * torch::randn({8});  // token 5 only (not a constant: LayerNorm removes one)
  auto pair_01 = [](Policy& p, const MergeContext& c) { return p.merge_logits(c)[0][0][1].item<double>(); };
  auto attentive = policy("self_attention"), plain = policy("learned");
  EXPECT_GT(std::abs(pair_01(*attentive, changed) - pair_01(*attentive, ctx)), 1e-4);
  EXPECT_NEAR(pair_01(*plain, changed), pair_01(*plain, ctx), 1e-6);
  // The estimator's gradient reaches the attention blocks, and not the tokens.
  auto tokens = ctx.tokens.clone().requires_grad_(true);
  auto with_grad = ctx;
  with_grad.tokens = tokens;
  with_grad.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  auto d = attentive->choose_merges(with_grad);
  d.log_prob.sum().backward();
  for (const auto& p : attentive->named_parameters())
    if (p.key().rfind("attention0.", 0) == 0) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
    }
  EXPECT_FALSE(tokens.grad().defined());
  auto no_blocks = htm::testing::plugins().default_params(PluginKind::policy, "self_attention");
  no_blocks.set("blocks", Value(int64_t{0}));
  BuildContext build;
  build.dim = 8;
  build.heads = 2;
  EXPECT_THROW(htm::testing::plugins().create<Policy>(PluginKind::policy, "self_attention", no_blocks, build), Error);
}

// Evaluation logs the policy's own one-number parameters: residual's gate, which starts at 0 and
// learns, and its inverse temperature; not its layers' parameters (no policy/unmerge.…).
TEST(ResidualPolicy, EvaluationLogsItsGateAndTemperature) {
  const std::string dir = htm::testing::fresh_dir("policy_scalars");
  const std::string file = dir + "/r.toml";
  std::ofstream(file)
      << "[experiment]\nname = \"r\"\n[policy]\nplugin = \"residual\"\n"
      << "[dataset]\nplugin = \"trees\"\ntrain_size = 64\ntest_size = 16\n[adapter]\nplugin = \"points\"\n"
      << "[model]\ndim = 16\nheads = 2\nlayers = 2\nschedule = [8, 4]\n"
      << "[train]\nbatch_size = 16\nimages = 0\n"
      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\nartifacts = \"" << dir << "/runs\"\n";
  RunRequest request;
  request.file = file;
  ASSERT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  ResultsStore store(dir + "/htm.sqlite");
  const auto logged =
      store.query("SELECT name, value FROM latest_metrics WHERE split = 'test' AND name LIKE 'policy/%' ORDER BY name");
  ASSERT_EQ(logged.rows.size(), 2u);
  EXPECT_EQ(logged.rows[0][0], "policy/gate");
  const double gate = std::stod(logged.rows[0][1]);
  EXPECT_NE(gate, 0.0);  // moved by its first AdamW steps
  EXPECT_LT(std::abs(gate), 0.05);
  EXPECT_EQ(logged.rows[1][0], "policy/log_inverse_temperature");
  EXPECT_NEAR(std::stod(logged.rows[1][1]), -std::log(0.1), 0.05);
}

}  // namespace
}  // namespace htm
