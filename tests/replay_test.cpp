// The slides' importance sampling from replay buffers (estimator.replay, issue 12): the
// importance-weighted surrogate on draws of another policy, the model merging replayed pairs,
// the buffer, and a short run that replays.
#include <fstream>

#include <torch/torch.h>

#include "config/experiment_config.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"
#include "train/estimator.h"
#include "train/experiment.h"
#include "train/replay.h"
#include "train/trainer.h"

namespace htm {
namespace {

// 4 tokens, 2 pairs merged: the 24 ordered draws, each pair with its own cost.
struct Draws {
  torch::Tensor src, dst;  // 24×2
};

Draws every_draw() {
  std::vector<int64_t> s, d;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 4; ++k)
        for (int64_t l = 0; l < 4; ++l)
          if (i != j && k != l && k != i && k != j && l != i && l != j) s.insert(s.end(), {i, k}), d.insert(d.end(), {j, l});
  return {torch::tensor(s).view({-1, 2}), torch::tensor(d).view({-1, 2})};
}

torch::Tensor draw_cost(const torch::Tensor& cost, const torch::Tensor& src, const torch::Tensor& dst) {
  return cost.index_select(0, (src * 4 + dst).view(-1)).view(src.sizes()).sum(1);
}

TEST(Replay, ImportanceWeightsMakeAnotherPolicysDrawsUnbiasedForToday) {
  torch::manual_seed(41);
  auto theta = (1.5 * torch::randn({1, 4, 4}, torch::kDouble)).requires_grad_(true);  // today's policy
  auto then = theta.detach() + 0.7 * torch::randn({1, 4, 4}, torch::kDouble);        // the one that drew
  auto cost = torch::rand({16}, torch::kDouble) * 4.0;
  // The exact gradient of today's expected cost, by enumeration.
  const Draws all = every_draw();
  auto p = pair_log_prob(theta.expand({24, 4, 4}), all.src, all.dst, LogProbForm::exact).sum(1).exp();
  auto exact = torch::autograd::grad({(p * draw_cost(cost, all.src, all.dst)).sum()}, {theta})[0];

  EstimatorSettings settings = default_settings().estimator;
  settings.replay_clip = 1e9;  // untruncated
  Estimator estimator(settings);
  const int64_t n = 200000;
  auto [src, dst] = sample_disjoint_pairs(then.to(torch::kFloat).expand({n, 4, 4}), 2, at::make_generator<at::CPUGeneratorImpl>(3));
  auto behaviour = pair_log_prob(then.expand({n, 4, 4}), src, dst, LogProbForm::exact).sum(1);
  auto now = pair_log_prob(theta.expand({n, 4, 4}), src, dst, LogProbForm::exact).sum(1);
  auto replayed = estimator.replayed(draw_cost(cost, src, dst), now, now, behaviour);
  auto grad = torch::autograd::grad({replayed}, {theta}, {}, true)[0];
  const double scale = exact.abs().max().item<double>();
  EXPECT_LT((grad - exact).abs().max().item<double>(), 0.08 * scale) << grad << "\nexact\n" << exact;
  // Without the weights the same draws estimate the gradient of the other policy's objective.
  auto unweighted = torch::autograd::grad({((draw_cost(cost, src, dst) - draw_cost(cost, src, dst).mean()) * now).mean()}, {theta})[0];
  EXPECT_GT((unweighted - exact).abs().max().item<double>(), 0.25 * scale);
  ASSERT_EQ(estimator.diagnostics().size(), 1u);
  EXPECT_EQ(estimator.diagnostics()[0].first, "policy_replay_weight");
  EXPECT_NEAR(estimator.diagnostics()[0].second.item<double>(), 1.0, 0.03);  // E_q[p / q] = 1

  settings.replay_clip = 0.5;  // truncated: no weight above the clip
  Estimator clipped(settings);
  clipped.replayed(draw_cost(cost, src, dst), now, now, behaviour);
  EXPECT_LE(clipped.diagnostics()[0].second.item<double>(), 0.5);
}

const Registry& registry() {
  static const Registry r({HTM_PLUGIN_DIR});
  return r;
}

std::string trees_file(const std::string& dir, const std::string& extra) {
  const std::string path = dir + "/replay.toml";
  std::ofstream(path) << "[experiment]\nname = \"replay\"\nseeds = [0]\n"
                      << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 128\ntest_size = 64\n"
                      << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n[policy]\nplugin = \"learned\"\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 4\nmlp_ratio = 2\ndropout = 0.0\n"
                      << "[train]\nepochs = 2\nbatch_size = 32\nlog_every = 1\nrho0 = 1.0\nlr = 0.001\nimages = 0\n"
                      << "checkpoint = false\n[runtime]\nthreads = 1\n"
                      << extra;
  return path;
}

Experiment trees(const std::string& dir, const std::string& extra) {
  ExperimentFile file = ExperimentFile::load(trees_file(dir, extra), {});
  return assemble(file.resolve(file.variants()[0], registry()), registry(), 0);
}

TEST(Replay, TheModelMergesTheReplayedPairsAndThePolicyScoresThem) {
  const std::string dir = htm::testing::fresh_dir("replay_model");
  Experiment ex = trees(dir, "");
  Experiment random = trees(dir, "[variants.random]\npolicy.plugin = \"random\"\n");
  ex.model->eval();
  Batch batch = ex.dataset->get(Split::train, torch::arange(8));
  torch::NoGradGuard no_grad;
  auto first = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1));
  ReplayBuffer buffer(2);
  buffer.add(batch, ex.schedule, first);
  auto past = buffer.draw(8, at::make_generator<at::CPUGeneratorImpl>(2));
  ASSERT_TRUE(past.has_value());
  EXPECT_TRUE(torch::allclose(past->behaviour, merge_log_prob(first)));
  ForwardHooks hooks;
  hooks.merges = past->merges;
  // Another generator: the merges are the replayed ones, not a new draw.
  auto again = ex.model->forward(past->batch.input, past->schedule, at::make_generator<at::CPUGeneratorImpl>(99), &hooks);
  for (size_t d = 0; d < first.merges.size(); ++d) {
    EXPECT_TRUE(torch::equal(again.merges[d].src, first.merges[d].src)) << "layer " << d + 1;
    EXPECT_TRUE(torch::allclose(again.merges[d].log_prob, first.merges[d].log_prob, 1e-5, 1e-6)) << "layer " << d + 1;
  }
  EXPECT_TRUE(torch::allclose(again.output, first.output, 1e-5, 1e-6));

  // The buffer keeps the newest draws up to its capacity and hands out whole rows of one.
  buffer.add(batch, ex.schedule, first);
  buffer.add(batch, ex.schedule, first);
  EXPECT_EQ(buffer.size(), 2u);
  auto part = buffer.draw(3, at::make_generator<at::CPUGeneratorImpl>(5));
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(part->batch.input.size(0), 3);
  EXPECT_EQ(part->merges[0].src.size(0), 3);
  // A policy with nothing to learn leaves nothing to weigh a replay by.
  ReplayBuffer none(2);
  none.add(batch, random.schedule, random.model->forward(batch.input, random.schedule, at::make_generator<at::CPUGeneratorImpl>(1)));
  EXPECT_EQ(none.size(), 0u);
}

TEST(Replay, ARunReplaysAndLogsItsWeights) {
  const std::string dir = htm::testing::fresh_dir("replay_run");
  Experiment ex = trees(dir, "[estimator]\nreplay = 16\nreplay_capacity = 4\n");
  ResultsStore store(dir + "/replay.sqlite");
  RunInfo info;
  info.experiment = "replay";
  info.variant = "replay";
  info.config_toml = ex.config.toml;
  info.config_hash = ex.config.hash;
  Trainer(ex, store, store.begin_run(info), dir + "/runs", 0, "replay").run();
  auto w = store.query("SELECT COUNT(*), MIN(value), MAX(value) FROM metrics WHERE name = 'policy_replay_weight'");
  EXPECT_GT(std::stoi(w.rows[0][0]), 0);  // every step but the first replays
  EXPECT_GT(std::stod(w.rows[0][1]), 0);
  EXPECT_LE(std::stod(w.rows[0][2]), 2.0);  // replay_clip's default
}

}  // namespace
}  // namespace htm
