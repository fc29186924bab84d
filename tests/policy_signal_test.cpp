// The policy studies' tools (issue 12, docs/policy.md): the oracle policy that follows the
// data's true tree, evaluating the same weights under another policy (train.eval_policies),
// the policy's own optimiser (estimator.policy_lr), the model's side of the value baseline,
// the dense reward and replay (their estimator side: credit_test.cpp), and the multi-resolution
// (anytime) loss.
#include <filesystem>
#include <fstream>
#include <tuple>

#include <torch/torch.h>

#include "commands/runner.h"
#include "config/experiment_config.h"
#include "hierarchy/tree_scoring.h"
#include "plugins_util.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"
#include "train/estimator/replay.h"
#include "train/experiment.h"
#include "train/step.h"
#include "train/trainer.h"

namespace htm {
namespace {

// 16-point Trees, merged [8, 4, 2, 1]: the schedule can build every true tree.
std::string trees_file(const std::string& dir, const std::string& extra) {
  const std::string path = dir + "/signal.toml";
  std::ofstream(path) << "[experiment]\nname = \"signal\"\nseeds = [0]\n"
                      << "[dataset]\nplugin = \"trees\"\ntokens = 16\ntrain_size = 128\ntest_size = 64\n"
                      << "[adapter]\nplugin = \"points\"\n"
                      << "[loss.point_set]\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 4\nmlp_ratio = 2\ndropout = 0.0\n"
                      << "[train]\nepochs = 1\nbatch_size = 32\nlog_every = 1\nrho0 = 1.0\nlr = 0.001\nimages = 0\n"
                      << "checkpoint = false\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\n"
                      << "artifacts = \"" << dir << "/runs\"\n"
                      << extra;
  return path;
}

ResolvedConfig resolve(const std::string& path, const std::vector<std::string>& overrides = {}) {
  ExperimentFile file = ExperimentFile::load(path, overrides);
  return file.resolve(file.variants()[0], htm::testing::plugins());
}

// Trains `ex` to the end as run `name` of experiment "signal" in `store`.
void train(Experiment& ex, ResultsStore& store, const std::string& dir, const std::string& name) {
  RunInfo info;
  info.experiment = "signal";
  info.variant = name;
  info.config_toml = ex.config.toml;
  info.config_hash = ex.config.hash;
  Trainer(ex, store, store.begin_run(info), dir + "/runs", 0, name).run();
}

double metric(ResultsStore& store, const std::string& name) {
  auto r = store.query("SELECT value FROM latest_metrics WHERE split = 'test' AND name = '" + name + "'");
  return r.rows.empty() ? -1 : std::stod(r.rows[0][0]);
}

TEST(OraclePolicy, MergesExactlyTheTrueTree) {
  const std::string dir = htm::testing::fresh_dir("oracle");
  Experiment ex = assemble(resolve(trees_file(dir, "[policy]\nplugin = \"oracle\"\n")), htm::testing::plugins(), 0);
  Batch batch = ex.dataset->get(Split::test, torch::arange(32));
  ForwardHooks hooks;
  hooks.tree = batch.tree;
  Experiment mixed = assemble(resolve(trees_file(dir, "[policy]\nplugin = \"oracle\"\ntruth_fraction = 0.5\n")),
                              htm::testing::plugins(), 0);
  torch::NoGradGuard no_grad;
  auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1), &hooks);
  const auto truth = true_trees(batch.tree);
  const auto merged = merge_trees(out.merges, 16);
  TreeScoreMean score;
  for (size_t b = 0; b < truth.size(); ++b) score.add(merged[b], truth[b]);
  for (const Metric& m : score.metrics("")) EXPECT_DOUBLE_EQ(m.value, 1.0) << m.name;

  // Half the samples follow the truth, the others merge at random.
  auto half = mixed.model->forward(batch.input, mixed.schedule, at::make_generator<at::CPUGeneratorImpl>(1), &hooks);
  TreeScoreMean half_score;
  const auto half_trees = merge_trees(half.merges, 16);
  int64_t exact = 0;
  for (size_t b = 0; b < truth.size(); ++b) {
    TreeScoreMean one;
    one.add(half_trees[b], truth[b]);
    exact += one.metrics("")[2].value == 1.0 ? 1 : 0;  // sibling F1
  }
  EXPECT_GT(exact, 6);  // ~16 of 32 expected
  EXPECT_LT(exact, 26);
}

// direction = "content": the same true pairs as the draw, each merged from the token whose first
// feature is smaller into the other; "drawn" keeps the draw's directions (both occur).
TEST(OraclePolicy, ContentDirectionMergesTheSmallerFirstFeatureIntoTheOther) {
  const auto decide = [](const std::string& direction) {
    Params p = htm::testing::plugins().default_params(PluginKind::policy, "oracle");
    p.set("direction", direction);
    auto oracle = htm::testing::plugins().create<Policy>(PluginKind::policy, "oracle", p, BuildContext{});
    MergeContext ctx;
    torch::manual_seed(3);
    ctx.tokens = torch::randn({64, 8, 4});
    ctx.r = 4;
    ctx.generator = at::make_generator<at::CPUGeneratorImpl>(5);
    ctx.siblings = torch::zeros({64, 8, 8});
    for (int64_t k = 0; k < 4; ++k) ctx.siblings.select(1, 2 * k).select(1, 2 * k + 1).fill_(1);
    ctx.siblings = ctx.siblings + ctx.siblings.transpose(1, 2);
    auto d = oracle->choose_merges(ctx);
    auto first = ctx.tokens.select(2, 0);
    return std::make_tuple(d.src, d.dst, (first.gather(1, d.src) <= first.gather(1, d.dst)).to(torch::kFloat));
  };
  const auto [src, dst, ordered] = decide("content");
  EXPECT_EQ(ordered.min().item<float>(), 1.0f);  // every pair smaller-first
  EXPECT_TRUE(torch::equal(torch::div(torch::minimum(src, dst), 2, "floor"),
                           torch::div(torch::maximum(src, dst), 2, "floor")));  // true pairs
  const auto [src2, dst2, ordered2] = decide("drawn");
  EXPECT_TRUE(torch::equal(torch::minimum(src, dst), torch::minimum(src2, dst2)));  // the same pairs
  const double share = ordered2.mean().item<double>();
  EXPECT_GT(share, 0.3);  // the draw's directions: about half smaller-first
  EXPECT_LT(share, 0.7);
  Params bad = htm::testing::plugins().default_params(PluginKind::policy, "oracle");
  bad.set("direction", std::string("sideways"));
  EXPECT_THROW(htm::testing::plugins().create<Policy>(PluginKind::policy, "oracle", bad, BuildContext{}), Error);
}

TEST(OraclePolicy, IsRefusedOnDataWithoutATree) {
  HTM_SKIP_WITHOUT_FASHION_MNIST();
  const std::string dir = htm::testing::fresh_dir("no_tree");
  std::ofstream(dir + "/img.toml") << "[adapter]\nplugin = \"image\"\npatch = 7\nfourier_bands = 4\n"
                                   << "[policy]\nplugin = \"oracle\"\n"
                                   << "[model]\ndim = 16\nheads = 2\nlayers = 2\n";
  EXPECT_THAT(htm::testing::error_of([&] { assemble(resolve(dir + "/img.toml"), htm::testing::plugins(), 0); }),
              ::testing::HasSubstr("true hierarchy"));
}

TEST(EvalPolicies, TheSameWeightsAreScoredUnderEachPolicy) {
  const std::string dir = htm::testing::fresh_dir("switch");
  RunRequest request;
  request.file = trees_file(dir, "[policy]\nplugin = \"random\"\n");
  request.overrides = {"train.eval_policies=[\"oracle\", \"random\"]"};
  ASSERT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  ResultsStore store(dir + "/htm.sqlite");
  // Under the oracle the evaluation's trees are the truth; under random they are at its floor.
  EXPECT_DOUBLE_EQ(metric(store, "under/oracle/sibling_f1"), 1.0);
  EXPECT_DOUBLE_EQ(metric(store, "under/oracle/cluster_f1"), 1.0);
  EXPECT_LT(metric(store, "under/random/sibling_f1"), 0.4);
  // The trained policy is random too: its own scores match the switched random evaluation's
  // scale, and each evaluation reports its own reconstruction error.
  EXPECT_LT(metric(store, "sibling_f1"), 0.4);
  for (const char* name : {"under/oracle/mse", "under/random/mse", "under/oracle/loss/point_set"})
    EXPECT_GT(metric(store, name), 0) << name;
  // Under the same random policy and the same evaluation draws, the switched run repeats the trained one.
  EXPECT_DOUBLE_EQ(metric(store, "under/random/mse"), metric(store, "mse"));
}

// train.eval_greedy: the evaluation takes each layer's best pairs of the policy's logits. nearest
// drawing at temperature 0.5 then merges as nearest at temperature 0 (greedy) does, to the same
// numbers; its draws are logged beside as sampled/…, and they find fewer true siblings.
TEST(EvalGreedy, GreedyEvaluationMergesThePoliciesBestPairsAndLogsTheDrawsBeside) {
  const std::string dir = htm::testing::fresh_dir("greedy");
  RunRequest request;
  request.file = trees_file(dir, "[policy]\nplugin = \"nearest\"\ntemperature = 0.5\n");
  request.overrides = {"train.eval_greedy=true", "train.eval_policies=[\"nearest\"]"};
  ASSERT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  ResultsStore store(dir + "/htm.sqlite");
  for (const char* name : {"sibling_f1", "cluster_f1", "mse"})
    EXPECT_DOUBLE_EQ(metric(store, name), metric(store, std::string("under/nearest/") + name)) << name;
  EXPECT_GT(metric(store, "sampled/mse"), 0);
  EXPECT_LT(metric(store, "sampled/sibling_f1"), metric(store, "sibling_f1"));
}

TEST(EvalPolicies, AnUnknownPolicyIsNamedWhereItIsWritten) {
  const std::string dir = htm::testing::fresh_dir("unknown");
  const std::string message =
      htm::testing::error_of([&] { resolve(trees_file(dir, ""), {"train.eval_policies=[\"orcale\"]"}); });
  EXPECT_THAT(message, ::testing::HasSubstr("unknown policy plugin 'orcale'"));
  EXPECT_THAT(message, ::testing::HasSubstr("oracle"));  // the known names are listed
  // rloo without rollouts is refused at the setting.
  const std::string rloo =
      htm::testing::error_of([&] { resolve(trees_file(dir, "[estimator]\nbaseline = \"rloo\"\n")); });
  EXPECT_THAT(rloo, ::testing::HasSubstr("signal.toml:"));
  EXPECT_THAT(rloo, ::testing::HasSubstr("rollouts"));
  // A value baseline for A.4's estimator, which has no reward, is refused at the line that asks.
  const std::string value = htm::testing::error_of(
      [&] { resolve(trees_file(dir, "[estimator]\nmethod = \"prob_scale\"\nbaseline = \"value\"\n")); });
  EXPECT_THAT(value, ::testing::HasSubstr("signal.toml:32:"));
  EXPECT_THAT(value, ::testing::HasSubstr("prob_scale"));
}

TEST(PolicyOptimiser, ThePolicyTrainsAtItsOwnRate) {
  const std::string dir = htm::testing::fresh_dir("policy_lr");
  auto policy_params = [](Experiment& ex) {
    std::vector<torch::Tensor> out;
    for (const auto& p : ex.model->named_parameters())
      if (p.key().rfind("policy.", 0) == 0) out.push_back(p.value().detach().clone());
    return out;
  };
  auto run = [&](const std::string& extra, const std::string& name) {
    Experiment ex =
        assemble(resolve(trees_file(dir, "[policy]\nplugin = \"learned\"\n" + extra)), htm::testing::plugins(), 0);
    auto before = policy_params(ex);
    ResultsStore store(dir + "/" + name + ".sqlite");
    train(ex, store, dir, name);
    auto after = policy_params(ex);
    double change = 0;
    for (size_t k = 0; k < before.size(); ++k)
      change = std::max(change, (after[k] - before[k]).abs().max().item<double>());
    return change;
  };
  const double shared = run("", "shared");
  const double slow = run("[estimator]\npolicy_lr = 1e-9\n", "slow");
  EXPECT_GT(shared, 1e-4);
  EXPECT_LT(slow, 1e-6);
}

TEST(ValueBaseline, EachDrawIsValuedAndOnlyTheValueHeadsLearnFromTheirRegression) {
  const std::string dir = htm::testing::fresh_dir("value_baseline");
  const std::string file = trees_file(dir, "[policy]\nplugin = \"learned\"\n[estimator]\nbaseline = \"value\"\n");
  Experiment ex = assemble(resolve(file), htm::testing::plugins(), 0);
  Experiment plain = assemble(resolve(trees_file(dir, "[policy]\nplugin = \"learned\"\n")), htm::testing::plugins(), 0);
  EXPECT_GT(ex.parameters, plain.parameters);  // the value heads, and only with the value baseline
  ASSERT_TRUE(ex.values);
  Batch batch = ex.dataset->get(Split::train, torch::arange(32));
  auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1));
  // Four merge layers are drawn; unmerging 100 % of a population is forced: its draws carry no
  // log-probability, and the estimator values only the draws that do.
  std::vector<const Draw*> learned;
  for (const Draw& d : out.draws)
    if (d.log_prob.defined()) learned.push_back(&d);
  ASSERT_EQ(learned.size(), 4u);
  auto summed = learned[0]->log_prob.sum(1);
  for (size_t k = 1; k < learned.size(); ++k) summed = summed + learned[k]->log_prob.sum(1);
  EXPECT_TRUE(torch::allclose(summed, total_log_prob(out)));
  auto g = torch::rand({32});
  torch::Tensor error = torch::zeros({});
  for (const Draw* d : learned)
    error = error + (ex.values->forward(d->population, d->kind == Draw::Kind::unmerge) - g).pow(2).mean();
  std::vector<std::string> names;
  std::vector<torch::Tensor> params;
  for (const auto& p : ex.model->named_parameters()) names.push_back(p.key()), params.push_back(p.value());
  auto grads = torch::autograd::grad({error}, params, {}, true, false, /*allow_unused=*/true);
  double value_grad = 0;
  for (size_t k = 0; k < params.size(); ++k) {
    const double norm = grads[k].defined() ? grads[k].abs().max().item<double>() : 0.0;
    if (names[k].rfind("value.", 0) == 0)
      value_grad = std::max(value_grad, norm);
    else
      EXPECT_EQ(norm, 0.0) << names[k] << " learns from the values' regression";
  }
  EXPECT_GT(value_grad, 0);

  // A short run logs how well the values predict the loss.
  ResultsStore store(dir + "/value.sqlite");
  train(ex, store, dir, "value");
  auto logged = store.query("SELECT COUNT(*) FROM metrics WHERE name = 'policy_value_error' AND value > 0");
  EXPECT_GT(std::stoi(logged.rows[0][0]), 0);
}

TEST(DenseReward, APairsErrorStartsAsHalfItsSquaredDistance) {
  // At initialisation the residual merge is the pair's mean and the unmerge copies it back, so a
  // merged pair's local error is mean_c (a − b)² / 2: the dense reward starts by preferring
  // close pairs. Without transformer blocks the merged tokens are those entering each layer.
  const std::string dir = htm::testing::fresh_dir("dense");
  const std::string file = trees_file(dir, "[policy]\nplugin = \"learned\"\n[estimator]\ndense = 1.0\n");
  Experiment ex = assemble(resolve(file, {"model.transformer=false"}), htm::testing::plugins(), 0);
  Batch batch = ex.dataset->get(Split::train, torch::arange(8));
  torch::NoGradGuard no_grad;
  Estimator estimator(ex.config.settings.estimator);
  ForwardHooks hooks;
  hooks.pair_errors = estimator.wants_pair_errors();  // the pair errors are measured as each layer merges
  auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1), &hooks);
  std::vector<Draw> merge_draws;
  for (const Draw& draw : out.draws)
    if (draw.kind == Draw::Kind::merge)
      merge_draws.push_back(draw);
    else
      EXPECT_FALSE(draw.pair_error.defined());
  ASSERT_EQ(merge_draws.size(), 4u);
  for (size_t d = 0; d < 4; ++d) {
    const Draw& draw = merge_draws[d];
    ASSERT_TRUE(draw.pair_error.defined()) << "layer " << d + 1;
    const auto& x = out.encoder_tokens[d];
    const auto& m = out.merges[d];
    auto at = [&](const torch::Tensor& index) {
      return x.gather(1, index.unsqueeze(-1).expand({8, index.size(1), x.size(2)}));
    };
    auto expected = (at(m.src) - at(m.dst)).pow(2).mean(-1) / 2;
    EXPECT_TRUE(torch::allclose(draw.pair_error, expected, 1e-4, 1e-6)) << "layer " << d + 1;
    EXPECT_TRUE(torch::equal(draw.log_prob, m.log_prob));
  }
  // A pass measures them only when asked.
  for (const Draw& draw :
       ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1)).draws)
    EXPECT_FALSE(draw.pair_error.defined());
  const std::string refused =
      htm::testing::error_of([&] { resolve(trees_file(dir, "[estimator]\nmethod = \"prob_scale\"\ndense = 0.5\n")); });
  EXPECT_THAT(refused, ::testing::HasSubstr("signal.toml:32:"));
  EXPECT_THAT(refused, ::testing::HasSubstr("'estimator.dense'"));
}

TEST(Replay, TheModelMergesTheReplayedPairsAndThePolicyScoresThem) {
  const std::string dir = htm::testing::fresh_dir("replay_model");
  Experiment ex = assemble(resolve(trees_file(dir, "[policy]\nplugin = \"learned\"\n")), htm::testing::plugins(), 0);
  Experiment random = assemble(resolve(trees_file(dir, "[policy]\nplugin = \"random\"\n")), htm::testing::plugins(), 0);
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
  auto again =
      ex.model->forward(past->batch.input, past->schedule, at::make_generator<at::CPUGeneratorImpl>(99), &hooks);
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
  none.add(batch, random.schedule,
           random.model->forward(batch.input, random.schedule, at::make_generator<at::CPUGeneratorImpl>(1)));
  EXPECT_EQ(none.size(), 0u);
}

TEST(Replay, ARunReplaysAndLogsItsWeights) {
  const std::string dir = htm::testing::fresh_dir("replay_run");
  Experiment ex = assemble(
      resolve(trees_file(dir, "[policy]\nplugin = \"learned\"\n[estimator]\nreplay = 16\nreplay_capacity = 4\n")),
      htm::testing::plugins(), 0);
  ResultsStore store(dir + "/replay.sqlite");
  train(ex, store, dir, "replay");
  auto w = store.query("SELECT COUNT(*), MIN(value), MAX(value) FROM metrics WHERE name = 'policy_replay_weight'");
  EXPECT_GT(std::stoi(w.rows[0][0]), 0);  // every step but the first replays
  EXPECT_GT(std::stod(w.rows[0][1]), 0);
  EXPECT_LE(std::stod(w.rows[0][2]), 2.0);  // replay_clip's default
}

TEST(Anytime, EachLevelIsWhatTheShallowerScheduleReconstructs) {
  // The oracle's merges and the mirror's unmerges draw nothing, so the reconstruction from the
  // population after layer d is exactly what a pass with the schedule's first d layers outputs.
  const std::string dir = htm::testing::fresh_dir("anytime_levels");
  const std::string file = trees_file(dir, "[policy]\nplugin = \"oracle\"\n");
  Experiment ex =
      assemble(resolve(file, {"train.anytime=1.0", "model.unmerge=\"mirror\""}), htm::testing::plugins(), 0);
  Batch batch = ex.dataset->get(Split::train, torch::arange(8));
  ForwardHooks hooks;
  hooks.tree = batch.tree;
  auto gen = [] { return at::make_generator<at::CPUGeneratorImpl>(1); };
  torch::NoGradGuard no_grad;
  ForwardHooks with_levels = hooks;
  with_levels.levels = true;
  auto out = ex.model->forward(batch.input, ex.schedule, gen(), &with_levels);
  ASSERT_EQ(out.levels.size(), ex.schedule.size() - 1);
  for (size_t d = 1; d < ex.schedule.size(); ++d) {
    const std::vector<int64_t> shallow(ex.schedule.begin(), ex.schedule.begin() + static_cast<std::ptrdiff_t>(d));
    auto reference = ex.model->forward(batch.input, shallow, gen(), &hooks);
    ASSERT_TRUE(out.levels[d - 1].sizes() == out.output.sizes());
    EXPECT_TRUE(torch::allclose(out.levels[d - 1], reference.output, 1e-5, 1e-6)) << "level " << d;
    EXPECT_FALSE(torch::allclose(out.levels[d - 1], out.output, 1e-3, 1e-4)) << "level " << d;
  }
  // A pass reconstructs from the bottleneck alone unless the anytime loss asks for the levels.
  auto unasked = ex.model->forward(batch.input, ex.schedule, gen(), &hooks);
  EXPECT_TRUE(torch::equal(unasked.output, out.output));
  EXPECT_TRUE(unasked.levels.empty());
}

TEST(Anytime, TheLossAddsTheLevelsMeanAndARunLogsIt) {
  const std::string dir = htm::testing::fresh_dir("anytime_loss");
  Experiment ex = assemble(resolve(trees_file(dir, "[policy]\nplugin = \"learned\"\n"), {"train.anytime=0.5"}),
                           htm::testing::plugins(), 0);
  Batch batch = ex.dataset->get(Split::train, torch::arange(8));
  ForwardHooks hooks;
  hooks.levels = true;
  auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(1), &hooks);
  ASSERT_EQ(out.levels.size(), 3u);
  std::vector<PendingMetric> pending;
  auto g = training_objective(ex.losses, out, batch, 0, 0, true, false, &pending, 0.5);
  const std::vector<Metric> terms = read_metrics(pending);
  auto expected = training_objective(ex.losses, out, batch, 0, 0, true, false);  // weight 0: L_D alone
  torch::Tensor levels = torch::zeros_like(expected);
  for (const auto& level_output : out.levels) {
    ForwardResult level;
    level.output = level_output;
    levels = levels + training_objective(ex.losses, level, batch, 0, 0, true, false) / 3.0;
  }
  EXPECT_TRUE(torch::allclose(g, expected + 0.5 * levels));
  ASSERT_EQ(terms.back().name, "loss/anytime");
  EXPECT_NEAR(terms.back().value, levels.mean().item<double>(), 1e-6);
  // A run logs the levels' loss; a classifier, with no decoder, is refused where the weight is written.
  ResultsStore store(dir + "/anytime.sqlite");
  train(ex, store, dir, "anytime");
  auto logged = store.query("SELECT COUNT(*) FROM metrics WHERE name = 'loss/anytime' AND split = 'train'");
  EXPECT_GT(std::stoi(logged.rows[0][0]), 0);
  std::ofstream(dir + "/classify.toml") << "[experiment]\nname = \"c\"\n[dataset]\nplugin = \"trees\"\n"
                                        << "[adapter]\nplugin = \"points\"\n[model]\ntask = \"classify\"\n"
                                        << "[train]\nanytime = 1.0\n";
  const std::string refused = htm::testing::error_of([&] { resolve(dir + "/classify.toml"); });
  EXPECT_THAT(refused, ::testing::HasSubstr("classify.toml:10:"));
  EXPECT_THAT(refused, ::testing::HasSubstr("'train.anytime'"));
}

TEST(LogitBound, TheHostBoundsEveryMergeDecision) {
  // Bounded at 1e-4 every pair logit is nearly 0: each layer's merge distribution is uniform
  // over its T(T−1) ordered pairs, whatever the policy's weights (T = 16, 8, 4, 2 here).
  const std::string dir = htm::testing::fresh_dir("logit_bound");
  const std::string file = trees_file(dir, "[policy]\nplugin = \"learned\"\n");
  Experiment bounded = assemble(resolve(file, {"estimator.logit_bound=1e-4"}), htm::testing::plugins(), 0);
  Experiment free = assemble(resolve(file), htm::testing::plugins(), 0);
  Batch batch = bounded.dataset->get(Split::train, torch::arange(8));
  torch::NoGradGuard no_grad;
  auto out = bounded.model->forward(batch.input, bounded.schedule, at::make_generator<at::CPUGeneratorImpl>(1));
  const double uniform = std::log(240.0) + std::log(56.0) + std::log(12.0) + std::log(2.0);
  EXPECT_TRUE(torch::allclose(total_entropy(out), torch::full({8}, uniform), 1e-4, 1e-4));
  // Unbounded, the same initial weights are not uniform.
  auto raw = free.model->forward(batch.input, free.schedule, at::make_generator<at::CPUGeneratorImpl>(1));
  EXPECT_LT(total_entropy(raw).max().item<double>(), uniform - 1e-3);
}

// estimator.baseline = "policy" (self-critical): each sample's advantage is its loss minus the
// loss of the same input under the baseline policy's merges, with the same weights.
TEST(PolicyBaseline, TheReferenceIsTheSameInputsLossUnderTheBaselinePolicy) {
  EstimatorSettings settings;
  settings.baseline = RewardBaseline::policy;
  settings.baseline_policy = "nearest";
  Estimator estimator(settings);
  auto g = torch::tensor({1.0, 2.0, 3.0, 4.0}), reference = torch::tensor({1.5, 1.5, 3.5, 3.0});
  auto log_prob = torch::zeros({4}, torch::requires_grad());
  auto total = estimator.objective(g, log_prob, {}, {}, {}, {}, reference);
  EXPECT_TRUE(torch::allclose(torch::autograd::grad({total}, {log_prob})[0], (g - reference) / 4.0));
  EXPECT_THAT(htm::testing::error_of([&] { estimator.objective(g, log_prob); }),
              ::testing::HasSubstr("no reference loss"));

  // In a step: the reference pass runs the trained weights under nearest (greedy merges; mirrored
  // unmerges draw nothing), so it is the loss a nearest-switched pass gives the same batch.
  const std::string dir = htm::testing::fresh_dir("policy_baseline");
  const std::string file = trees_file(
      dir, "[policy]\nplugin = \"learned\"\n[estimator]\nbaseline = \"policy\"\nbaseline_policy = \"nearest\"\n");
  Experiment ex = assemble(resolve(file, {"model.unmerge=\"mirror\""}), htm::testing::plugins(), 0);
  ASSERT_TRUE(ex.baseline_policy);
  Batch batch = ex.dataset->get(Split::train, torch::arange(16));
  double expected = 0;
  {
    torch::NoGradGuard no_grad;
    auto* model = dynamic_cast<HtmModelImpl*>(ex.model.get());
    model->switch_policy(ex.baseline_policy);
    ForwardHooks hooks;
    hooks.tree = batch.tree;
    auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(3), &hooks);
    expected = training_objective(ex.losses, out, batch, 0, 0, true, false).mean().item<double>();
    model->switch_policy(nullptr);
  }
  ex.model->train();
  TrainStep step(ex, at::make_generator<at::CPUGeneratorImpl>(5));
  StepRequest request;
  request.batch = batch;
  request.batch_rows = 16;
  request.schedule = ex.schedule;
  request.log = true;
  const StepReport report = step(request);
  std::map<std::string, double> terms;
  for (const auto& term : report.terms) terms[term.name] = term.value;
  ASSERT_TRUE(terms.count("policy_baseline_loss"));
  EXPECT_NEAR(terms["policy_baseline_loss"], expected, 1e-6);
  EXPECT_GT(terms["policy_advantage_sd"], 0);
  // The trained policy decides again after the step.
  EXPECT_NE(&dynamic_cast<HtmModelImpl*>(ex.model.get())->policy(), ex.baseline_policy.get());

  // Each half without the other is refused where the file writes it; so is an unknown policy.
  const std::string unnamed =
      htm::testing::error_of([&] { resolve(trees_file(dir, "[estimator]\nbaseline = \"policy\"\n")); });
  EXPECT_THAT(unnamed, ::testing::HasSubstr("signal.toml:31:"));
  EXPECT_THAT(unnamed, ::testing::HasSubstr("baseline_policy"));
  const std::string unused =
      htm::testing::error_of([&] { resolve(trees_file(dir, "[estimator]\nbaseline_policy = \"nearest\"\n")); });
  EXPECT_THAT(unused, ::testing::HasSubstr("signal.toml:31:"));
  const std::string unknown = htm::testing::error_of(
      [&] { resolve(trees_file(dir, "[estimator]\nbaseline = \"policy\"\nbaseline_policy = \"neerest\"\n")); });
  EXPECT_THAT(unknown, ::testing::HasSubstr("unknown policy plugin 'neerest'"));
}

}  // namespace
}  // namespace htm
