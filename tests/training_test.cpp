// What makes the networks train (issue 11, docs/training.md): the references every run is
// measured against, the residual form of the merge operators, the learning-rate and ρ
// schedules, and gradients reaching every block of a fresh model.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>
#include <tuple>

#include <torch/torch.h>

#include "commands/runner.h"
#include "htm/layers.h"
#include "htm/merge.h"
#include "plugins_util.h"
#include "registry.h"
#include "test_util.h"
#include "train/baselines.h"
#include "train/optimizer.h"
#include "train/schedules.h"
#include "train/trainer.h"

namespace htm {
namespace {

// ---- threads

// runtime.threads = 0 takes OMP_NUM_THREADS where it is a positive count, as torch itself reads
// it (ctest runs every htm of the suite on one thread so); anything else there, every core.
TEST(Threads, ZeroTakesOmpNumThreadsWhereItIsACountElseEveryCore) {
  const char* was = std::getenv("OMP_NUM_THREADS");
  const std::string saved = was != nullptr ? was : "";
  const int before = at::get_num_threads();
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(usable_cores(), 3);
  set_threads(0);
  EXPECT_EQ(at::get_num_threads(), 3);
  set_threads(2);  // a count of its own wins
  EXPECT_EQ(at::get_num_threads(), 2);
  for (const char* other : {"", "0", "-2", "two", "2x"}) {
    setenv("OMP_NUM_THREADS", other, 1);
    EXPECT_EQ(usable_cores(), cores) << "OMP_NUM_THREADS='" << other << "'";
  }
  unsetenv("OMP_NUM_THREADS");
  EXPECT_EQ(usable_cores(), cores);
  if (was != nullptr) setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  at::set_num_threads(before);
}

// ---- baselines

TEST(Baselines, PcaErrorIsTheSumOfTheDroppedVariances) {
  // Every sign pattern of (a, b, c) ∈ {±1}³ along three orthonormal directions with scales
  // 3, 2, 1 (so the scatter's eigenvalues are exactly 9N, 4N, N), rotated at random in D = 6.
  const int64_t D = 6;
  auto signs = torch::tensor({-1.0, 1.0}, torch::kDouble);
  auto grid = torch::stack(torch::meshgrid({signs, signs, signs}, "ij")).view({3, -1}).t();  // 8×3
  auto rotation = std::get<0>(torch::linalg_qr(torch::randn({D, D}, torch::kDouble)));
  auto mean = torch::randn({D}, torch::kDouble);
  auto rows = grid * torch::tensor({3.0, 2.0, 1.0}, torch::kDouble);
  auto x = (torch::cat({rows, torch::zeros({8, D - 3}, torch::kDouble)}, 1).mm(rotation) + mean).to(torch::kFloat);
  auto mse = [&](int64_t k) { return (pca_reconstruct(x, x, k) - x).pow(2).mean().item<double>(); };
  EXPECT_NEAR(mse(1), (4.0 + 1.0) / D, 1e-5);
  EXPECT_NEAR(mse(2), 1.0 / D, 1e-5);
  EXPECT_NEAR(mse(3), 0.0, 1e-5);
  EXPECT_NEAR(mse(0), (9.0 + 4.0 + 1.0) / D, 1e-5);  // no component: the mean
  EXPECT_TRUE(torch::equal(pca_reconstruct(x, x, D), x));
}

// Fewer rows than dimensions: the fits go through the N×N Gram matrix. The same answers as the
// D×D forms, which the same rows padded with zero columns past D (more dimensions than rows)
// and the plain rows (more rows than dimensions) give.
TEST(Baselines, FewerRowsThanDimensionsGiveTheSameFitsAsTheScatter) {
  torch::manual_seed(4);
  const int64_t n = 40, d = 30, classes = 3;
  auto labels = torch::arange(n) % classes;
  auto x = torch::randn({n, d}) + torch::eye(classes, d).index_select(0, labels) * 2.0;
  auto wide = torch::cat({x, torch::zeros({n, 2 * n})}, 1);  // D = 110 > N = 40
  auto test = torch::randn({12, d});
  auto test_wide = torch::cat({test, torch::zeros({12, 2 * n})}, 1);
  for (int64_t k : {1, 5, 20}) {
    auto narrow = pca_reconstruct(x, test, k);
    auto padded = pca_reconstruct(wide, test_wide, k);
    EXPECT_TRUE(torch::allclose(padded.narrow(1, 0, d), narrow, 1e-4, 1e-4)) << "k = " << k;
    EXPECT_TRUE(torch::allclose(padded.narrow(1, d, 2 * n), torch::zeros({12, 2 * n}), 0, 1e-5));
  }
  // Beyond the rows' span (rank n - 1 = 39 here) a wide fit reconstructs with the span alone.
  auto few = wide.narrow(0, 0, 8);
  EXPECT_TRUE(torch::allclose(pca_reconstruct(few, few, 50), few, 1e-4, 1e-4));
  auto test_labels = torch::arange(12) % classes;
  auto test_points = test + torch::eye(classes, d).index_select(0, test_labels) * 2.0;
  auto test_points_wide = torch::cat({test_points, torch::zeros({12, 2 * n})}, 1);
  for (double ridge : {0.1, 1.0, 30.0})
    EXPECT_DOUBLE_EQ(ridge_accuracy(wide, labels, test_points_wide, test_labels, classes, ridge),
                     ridge_accuracy(x, labels, test_points, test_labels, classes, ridge))
        << "ridge " << ridge;
}

TEST(Baselines, RidgeClassifierSeparatesSeparableClassesAndNotNoise) {
  torch::manual_seed(3);
  const int64_t n = 600, classes = 3;
  auto labels = torch::arange(n) % classes;
  auto centres = torch::eye(classes) * 4.0;
  auto x = centres.index_select(0, labels) + 0.3 * torch::randn({n, classes});
  auto features = torch::cat({x, torch::randn({n, 5})}, 1);
  auto train = features.narrow(0, 0, 400), test = features.narrow(0, 400, 200);
  EXPECT_GT(ridge_accuracy(train, labels.narrow(0, 0, 400), test, labels.narrow(0, 400, 200), classes), 0.99);
  auto shuffled = labels.index_select(0, torch::randperm(n));
  const double chance = ridge_accuracy(train, shuffled.narrow(0, 0, 400), test, shuffled.narrow(0, 400, 200), classes);
  EXPECT_LT(chance, 0.5);
}

// ---- merge operators

TEST(MergeOperators, ResidualFormStartsAsTheMeanAndTheCopy) {
  BuildContext ctx;
  ctx.dim = 8;
  auto src = torch::randn({5, 8}), dst = torch::randn({5, 8});
  for (const std::string name : {"mlp", "moe"}) {
    auto op = htm::testing::plugins().create<MergeOperator>(
        PluginKind::merge, name, htm::testing::plugins().default_params(PluginKind::merge, name), ctx);
    EXPECT_TRUE(torch::allclose(op->merge(src, dst), 0.5 * (src + dst))) << name;
    auto [first, second] = op->unmerge(src);
    EXPECT_TRUE(torch::allclose(first, src) && torch::allclose(second, src)) << name;
    // Training moves it away from the identity: the last layer gets a gradient at once.
    (op->merge(src, dst) * dst).sum().backward();
    double g = 0;
    for (auto& p : op->parameters())
      if (p.grad().defined()) g += p.grad().abs().sum().item<double>();
    EXPECT_GT(g, 0) << name;

    if (name == "mlp") {  // merge.init_scale: the last layers start away from zero
      Params scaled = htm::testing::plugins().default_params(PluginKind::merge, name);
      scaled.set("init_scale", 1.0);
      auto op2 = htm::testing::plugins().create<MergeOperator>(PluginKind::merge, name, scaled, ctx);
      EXPECT_FALSE(torch::allclose(op2->merge(src, dst), 0.5 * (src + dst), 1e-3, 1e-3));
    }
    Params paper = htm::testing::plugins().default_params(PluginKind::merge, name);
    paper.set("residual", false);
    auto plain = htm::testing::plugins().create<MergeOperator>(PluginKind::merge, name, paper, ctx);
    EXPECT_FALSE(torch::allclose(plain->merge(src, dst), 0.5 * (src + dst), 1e-3, 1e-3)) << name;
  }
}

// Values a merge operator cannot use, refused in one line: a negative or infinite init_scale
// (mlp), a negative, infinite or NaN router_noise (moe: NaN noise routed every pair by nothing).
TEST(MergeOperators, SettingsTheyCannotUseAreRefused) {
  BuildContext ctx;
  ctx.dim = 8;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const std::vector<std::tuple<std::string, std::string, double, std::string>> cases = {
      {"mlp", "init_scale", -1.0, "init_scale"},
      {"mlp", "init_scale", inf, "init_scale"},
      {"moe", "router_noise", -1.0, "moe: router_noise must be a finite number, 0 or more, got -1"},
      {"moe", "router_noise", nan, "moe: router_noise must be a finite number, 0 or more, got nan"},
      {"moe", "router_noise", inf, "moe: router_noise must be a finite number, 0 or more, got inf"}};
  for (const auto& [name, key, value, message] : cases) {
    Params params = htm::testing::plugins().default_params(PluginKind::merge, name);
    params.set(key, value);
    EXPECT_THAT(htm::testing::error_of(
                    [&] { htm::testing::plugins().create<MergeOperator>(PluginKind::merge, name, params, ctx); }),
                ::testing::HasSubstr(message))
        << name << " " << key << " " << value;
  }
}

// ---- optimizer

TEST(FusedAdamW, MatchesTorchsAdamW) {
  torch::manual_seed(0);
  auto a = torch::randn({7, 5}).requires_grad_(), b = torch::randn({3}).requires_grad_();
  auto a2 = a.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
  torch::optim::AdamW reference({a, b}, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  FusedAdamW fused({a2, b2}, 0.01, 0.1);
  auto target = torch::randn({7, 5});
  for (int step = 0; step < 20; ++step) {
    const bool with_b = step % 3 != 0;  // b skips some steps: its step count is its own
    auto loss = [&](const torch::Tensor& x, const torch::Tensor& y) {
      auto l = (x - target).pow(3).abs().sum();
      return with_b ? l + (y * y).sum() * x.sum() : l;
    };
    reference.zero_grad();
    for (auto* p : {&a, &b}) p->mutable_grad() = torch::Tensor();
    loss(a, b).backward();
    reference.step();
    fused.zero_grad();
    loss(a2, b2).backward();
    if (step == 5) fused.set_lr(0.01);  // same value: set_lr is what the trainer calls per step
    fused.step();
  }
  EXPECT_TRUE(torch::allclose(a, a2, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(b, b2, 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(a, torch::randn({7, 5})));
}

// ---- schedules

TEST(Schedule, LearningRateWarmsUpThenDecays) {
  TrainSettings s = default_settings().train;
  s.lr = 1.0;
  s.warmup_steps = 3;
  s.lr_schedule = LrDecay::cosine;
  EXPECT_DOUBLE_EQ(lr_at(s, 0, 0, 13), 0.25);  // (step + 1) / (warmup + 1)
  EXPECT_DOUBLE_EQ(lr_at(s, 2, 0, 13), 0.75);
  EXPECT_DOUBLE_EQ(lr_at(s, 3, 0, 13), 1.0);    // the cosine starts at its top
  EXPECT_NEAR(lr_at(s, 8, 0, 13), 0.5, 1e-12);  // halfway through the 10 decay steps
  EXPECT_NEAR(lr_at(s, 13, 0, 13), 0.0, 1e-12);
  s.lr_schedule = LrDecay::step;  // the paper's step decay: × factor at each decay epoch reached
  s.warmup_steps = 0;
  s.lr_decay_epochs = {0, 2, 4};
  s.lr_decay_factor = 0.1;
  EXPECT_DOUBLE_EQ(lr_at(s, 5, 1, 13), 1.0);
  EXPECT_NEAR(lr_at(s, 5, 3, 13), 0.1, 1e-12);
  EXPECT_NEAR(lr_at(s, 5, 9, 13), 0.01, 1e-12);
}

TEST(Schedule, RhoRampsByStep) {
  EXPECT_DOUBLE_EQ(rho_ramp_at(0.2, 1.0, 0.5, 0, 100), 0.2);
  EXPECT_DOUBLE_EQ(rho_ramp_at(0.2, 1.0, 0.5, 25, 100), 0.6);
  EXPECT_DOUBLE_EQ(rho_ramp_at(0.2, 1.0, 0.5, 50, 100), 1.0);
  EXPECT_DOUBLE_EQ(rho_ramp_at(0.2, 2.0, 0.5, 99, 100), 2.0);
  EXPECT_DOUBLE_EQ(rho_ramp_at(0.2, 1.0, 0.0, 0, 100), 1.0);  // no ramp: the end at once
  TrainSettings s = default_settings().train;                 // the settings choose between the two schedules
  s.rho0 = 0.2;
  s.rho_step = 0.1;
  EXPECT_DOUBLE_EQ(rho_for(s, 25, 3, 100), rho_at(0.2, 0.1, 3));
  s.rho_schedule = RhoSchedule::step;
  EXPECT_DOUBLE_EQ(rho_for(s, 25, 3, 100), 0.6);
}

// ---- fresh models: gradients reach every block

ResolvedConfig tiny_config(const std::string& dir, const std::string& task, bool residual,
                           const std::string& model_extra = "") {
  std::ofstream(dir + "/t.toml") << "[adapter]\nplugin = \"image\"\npatch = 7\nfourier_bands = 4\n"
                                 << "[merge]\nplugin = \"mlp\"\nresidual = " << (residual ? "true" : "false") << "\n"
                                 << "[model]\ndim = 32\nheads = 2\nlayers = 4\ndropout = 0.0\ntask = \"" << task
                                 << "\"\n"
                                 << model_extra << (task == "classify" ? "[loss.cross_entropy]\n" : "");
  ExperimentFile file = ExperimentFile::load(dir + "/t.toml", {});
  return file.resolve(file.variants()[0], htm::testing::plugins());
}

// Gradient norm per top-level block after one backward pass of the task's loss.
std::map<std::string, double> block_gradients(Experiment& ex, const Batch& batch) {
  auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(0));
  auto loss = ex.config.settings.model.task == Task::classify
                  ? torch::nn::functional::cross_entropy(out.output, batch.labels)
                  : (out.output - batch.input).pow(2).mean();
  loss.backward();
  std::map<std::string, double> norms;
  for (const auto& child : ex.model->named_children()) {
    double sq = 0;
    for (const auto& p : child.value()->parameters())
      if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
    norms[child.key()] = std::sqrt(sq);
  }
  return norms;
}

TEST(FreshModel, GradientsReachEveryBlockThroughTheMergeChain) {
  const std::string dir = htm::testing::fresh_dir("grad");
  for (const std::string task : {"classify", "reconstruct"}) {
    Experiment ex = assemble(tiny_config(dir, task, true), htm::testing::plugins(), 0);
    ASSERT_EQ(ex.schedule.size(), 4u);  // 16 tokens -> 8 -> 4 -> 2 -> 1: the root alone
    auto batch = ex.dataset->get(Split::train, torch::arange(16));
    auto norms = block_gradients(ex, batch);
    for (const std::string block : {"adapter", "encoder_block", "merge", "merge_refine"})
      EXPECT_GT(norms[block], 0) << task << " " << block;
    if (task == "classify") {
      EXPECT_GT(norms["head"], 0);
    } else {
      EXPECT_GT(norms["decoder_block"], 0);
      EXPECT_GT(norms["unmerge_refine"], 0);
      // A fresh autoencoder outputs about one image for every input: each pixel's spread over
      // the batch is far below the data's.
      torch::NoGradGuard no_grad;
      auto out = ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(0)).output;
      EXPECT_LT(out.std(0).mean().item<double>(), 0.5 * batch.input.std(0).mean().item<double>());
    }
  }
  // Through the root of the classifier, the residual form passes far more of the signal to the
  // lifter than the paper's plain merge MLPs (docs/training.md measures this over training).
  auto lifter = [&](bool residual) {
    Experiment ex = assemble(tiny_config(dir, "classify", residual), htm::testing::plugins(), 0);
    auto norms = block_gradients(ex, ex.dataset->get(Split::train, torch::arange(16)));
    return norms["adapter"] / norms["head"];
  };
  EXPECT_GT(lifter(true), 3 * lifter(false));
}

// model.unmerge = "mirror": the decoder splits exactly the tokens the encoder merged, so the
// unmerge policy's scores change nothing; under "policy" (the paper) they choose what is split.
TEST(FreshModel, MirroredUnmergingIgnoresTheUnmergePolicy) {
  const std::string dir = htm::testing::fresh_dir("mirror");
  for (const std::string mode : {"mirror", "policy"}) {
    // 16 tokens -> 12 -> 10: the decoder chooses 2 of 10 tokens to split, then 4 of 12.
    Experiment ex = assemble(tiny_config(dir, "reconstruct", true, "schedule = [4, 2]\nunmerge = \"" + mode + "\"\n"),
                             htm::testing::plugins(), 0);
    ex.model->eval();
    auto batch = ex.dataset->get(Split::train, torch::arange(16));
    auto run = [&] {
      torch::NoGradGuard no_grad;
      return ex.model->forward(batch.input, ex.schedule, at::make_generator<at::CPUGeneratorImpl>(3));
    };
    auto before = run();
    {
      torch::NoGradGuard no_grad;
      for (auto& p : ex.model->named_parameters())
        if (p.key().find("policy.unmerge.") == 0) p.value().normal_(0, 10);
    }
    auto after = run();
    if (mode == "mirror") {
      EXPECT_TRUE(torch::equal(before.output, after.output));
      EXPECT_EQ(after.unmerge_log_probs.size(), 2u);  // the forced choices, kept out of the surrogate
    } else {
      EXPECT_FALSE(torch::allclose(before.output, after.output));
    }
  }
}

}  // namespace
}  // namespace htm
