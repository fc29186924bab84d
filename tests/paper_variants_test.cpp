// The paper's variants beyond the original model (issue 3): the policy-variation measure, the
// auxiliary losses against hand-computed values, the teacher-forced pass's token alignment, and
// the classifier and its parameter-matched ViT.
#include <torch/torch.h>

#include "commands/runner.h"
#include "hierarchy/policy_metrics.h"
#include "htm/loss.h"
#include "htm/merge.h"
#include "model/model.h"
#include "plugins_util.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

std::shared_ptr<Loss> loss(const std::string& name, const std::vector<std::pair<std::string, Value>>& set = {}) {
  Params p = htm::testing::plugins().default_params(PluginKind::loss, name);
  for (const auto& [k, v] : set) p.set(k, v);
  BuildContext ctx;
  ctx.num_classes = 10;
  return htm::testing::plugins().create<Loss>(PluginKind::loss, name, p, ctx);
}

// ---- policy_spread

TEST(PolicySpread, IdenticalPoliciesDoNotVaryAndUniformHasNoStructure) {
  auto same = torch::randn({1, 5, 5}).expand({6, 5, 5}).contiguous();
  EXPECT_NEAR(policy_spread(same).variation, 0.0, 1e-12);
  auto uniform = torch::zeros({3, 5, 5});
  EXPECT_NEAR(policy_spread(uniform).variation, 0.0, 1e-12);
  EXPECT_NEAR(policy_spread(uniform).structure, 0.0, 1e-12);
}

TEST(PolicySpread, KnownValues) {
  // T = 3. Input a: every token surely picks its next neighbour; input b: uniform. Each row is
  // one-hot against (1/2, 1/2): TV 1/2. Mean policy (3/4, 1/4) against uniform: TV 1/4.
  auto a = torch::zeros({3, 3});
  for (int64_t i = 0; i < 3; ++i) a[i][(i + 1) % 3] = 100.0;
  auto logits = torch::stack({a, torch::zeros({3, 3})});
  PolicySpread s = policy_spread(logits);
  EXPECT_NEAR(s.variation, 0.5, 1e-9);
  EXPECT_NEAR(s.structure, 0.25, 1e-9);
  // Inputs choosing disjoint partners (T = 3: next vs previous neighbour) differ completely.
  auto b = torch::zeros({3, 3});
  for (int64_t i = 0; i < 3; ++i) b[i][(i + 2) % 3] = 100.0;
  EXPECT_NEAR(policy_spread(torch::stack({a, b})).variation, 1.0, 1e-9);
  EXPECT_THROW(policy_spread(torch::zeros({1, 3, 3})), Error);
}

// ---- sinkhorn

TEST(Sinkhorn, OrderDoesNotMatterAndAShiftCostsItsSquare) {
  auto l = loss("sinkhorn", {{"epsilon", 0.01}, {"iterations", int64_t{200}}});
  // Six well-separated tokens (token t is t in every feature, then shuffled per sample): the
  // entropic plan is then the exact optimal matching to well within the tolerances below.
  auto a = torch::arange(6, torch::kFloat).view({1, 6, 1}).expand({2, 6, 4}).contiguous();
  a[1] = a[1].index_select(0, torch::tensor({2, 0, 5, 1, 4, 3}));
  LossContext ctx;
  ctx.input = torch::zeros({2, 1});
  ctx.encoder_tokens = {a};
  ctx.decoder_tokens = {a.index_select(1, torch::tensor({5, 3, 1, 0, 2, 4}))};
  auto permuted = l->per_sample(ctx);
  ctx.decoder_tokens = {a + 0.1};  // every token moved by 0.1 in each feature: cost 0.01 each
  auto shifted = l->per_sample(ctx);
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_LT(permuted[b].item<double>(), 1e-3);
    EXPECT_NEAR(shifted[b].item<double>(), 0.01, 1e-3);
  }
}

// ---- capacity

TEST(Capacity, NoiseWhileTrainingPenaltyAndRelease) {
  auto l = loss("capacity", {{"release_start", int64_t{10}}, {"release_steps", int64_t{20}}});
  auto x = torch::full({2, 3, 4}, 2.0);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  auto noised = l->enter_layer(torch::zeros({4, 64, 64}), LayerEntry{1, 0, 0, true, gen});
  EXPECT_NEAR(noised.std().item<double>(), 1.0, 0.02);  // unit Gaussian noise (eq. 5)
  auto half = l->enter_layer(torch::zeros({4, 64, 64}), LayerEntry{1, 0, 20, true, gen});
  EXPECT_NEAR(half.std().item<double>(), 0.5, 0.02);                                 // halfway through the release
  EXPECT_TRUE(torch::equal(l->enter_layer(x, LayerEntry{1, 0, 0, false, gen}), x));  // not in eval

  LossContext ctx;
  ctx.input = torch::zeros({2, 1});
  ctx.encoder_tokens = {x, x * 0.5};
  ctx.step = 0;
  auto full = l->per_sample(ctx);  // mean of 4 and 1
  EXPECT_NEAR(full[0].item<double>(), 2.5, 1e-6);
  ctx.step = 20;
  EXPECT_NEAR(l->per_sample(ctx)[0].item<double>(), 1.25, 1e-6);
  ctx.step = 40;
  EXPECT_NEAR(l->per_sample(ctx)[0].item<double>(), 0.0, 1e-6);
}

// ---- cross_entropy

TEST(CrossEntropy, MatchesTheDefinition) {
  auto l = loss("cross_entropy");
  auto logits = torch::randn({3, 10});
  auto labels = torch::tensor({1, 7, 3}, torch::kLong);
  LossContext ctx;
  ctx.input = torch::zeros({3, 1});
  ctx.output = logits;
  ctx.labels = labels;
  auto expected = torch::nn::functional::cross_entropy(
      logits, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  EXPECT_TRUE(torch::allclose(l->per_sample(ctx), expected, 1e-5, 1e-6));
  ctx.output = torch::randn({3, 1, 4, 4});
  EXPECT_THROW(l->per_sample(ctx), Error);
}

// ---- teacher forcing

// Merging keeps dst, unmerging copies the token into both children: with the refining blocks
// zeroed (identity), each layer's one-layer reconstruction is known exactly.
class CopyMerge : public MergeOperator {
 public:
  torch::Tensor merge(const torch::Tensor&, const torch::Tensor& dst) override { return dst; }
  std::pair<torch::Tensor, torch::Tensor> unmerge(const torch::Tensor& t) override { return {t, t}; }
};

TEST(TeacherForcing, EachLayerIsReconstructedInTheEncodersOrder) {
  BuildContext ctx;
  ctx.dim = 8;
  ctx.heads = 2;
  ctx.sample_shape = {1, 8, 8};
  Params adapter_params = htm::testing::plugins().default_params(PluginKind::adapter, "image");
  adapter_params.set("patch", int64_t{2});
  auto adapter = htm::testing::plugins().create<Adapter>(PluginKind::adapter, "image", adapter_params, ctx);
  auto policy = htm::testing::plugins().create<Policy>(
      PluginKind::policy, "learned", htm::testing::plugins().default_params(PluginKind::policy, "learned"), ctx);
  ModelOptions o;
  o.dim = 8;
  o.heads = 2;
  o.dropout = 0;
  o.mixing = Mixing::none;
  o.refinement = Refinement::mlp;
  HtmModel model(o, adapter, policy, std::make_shared<CopyMerge>());
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters())
      if (p.key().find("refine") != std::string::npos) p.value().zero_();
  }
  const std::vector<int64_t> schedule = {5, 3};
  auto out = model->forward_teacher_forced(torch::rand({2, 1, 8, 8}), schedule,
                                           at::make_generator<at::CPUGeneratorImpl>(4), nullptr);
  ASSERT_EQ(out.encoder_tokens.size(), 2u);
  ASSERT_EQ(out.decoder_tokens.size(), 2u);
  for (const Draw& d : out.draws) EXPECT_EQ(d.kind, Draw::Kind::merge);  // the unmerges are forced, not drawn
  ASSERT_EQ(out.draws.size(), 2u);
  ASSERT_EQ(out.unmerge_log_probs.size(), 2u);
  auto te = model->named_buffers()["timesteps"];
  for (size_t d = 0; d < 2; ++d) {
    const auto& x = out.encoder_tokens[d];
    ASSERT_EQ(out.decoder_tokens[d].sizes(), x.sizes());
    // Expected: every token is itself, except each merged src, which gets its dst's copy.
    auto expected = x.clone();
    const auto& m = out.merges[d];
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < schedule[d]; ++k)
        expected[b][m.src[b][k].item<int64_t>()] = x[b][m.dst[b][k].item<int64_t>()];
    auto got = out.decoder_tokens[d] - te[static_cast<int64_t>(d) + 1];  // the decoder's depth signal
    EXPECT_TRUE(torch::allclose(got, expected, 1e-5, 1e-5)) << "layer " << d + 1;
    ASSERT_EQ(m.log_prob.sizes(), (std::vector<int64_t>{2, schedule[d]}));
  }
  // The unmerge policy's cross-entropy on the true merges reaches its scorer.
  out.unmerge_log_probs[0].sum().backward();
  double g = 0;
  for (auto& p : policy->named_parameters())
    if (p.key().find("unmerge") != std::string::npos && p.value().grad().defined())
      g += p.value().grad().abs().sum().item<double>();
  EXPECT_GT(g, 0);
}

// ---- classifier and ViT

ResolvedConfig classify_config(const std::string& dir, const std::string& architecture) {
  std::ofstream(dir + "/c.toml") << "[adapter]\nplugin = \"image\"\npatch = 7\nfourier_bands = 4\n"
                                 << "[model]\ndim = 32\nheads = 2\nlayers = 3\ntask = \"classify\"\n"
                                 << "architecture = \"" << architecture << "\"\n"
                                 << "[loss.cross_entropy]\n";
  ExperimentFile file = ExperimentFile::load(dir + "/c.toml", {});
  return file.resolve(file.variants()[0], htm::testing::plugins());
}

TEST(Classifier, HtmGivesLogitsAndTheVitMatchesItsParameterCount) {
  const std::string dir = htm::testing::fresh_dir("cls");
  Experiment htm_ex = assemble(classify_config(dir, "htm"), htm::testing::plugins(), 0);
  auto batch = htm_ex.dataset->get(Split::train, torch::arange(3));
  auto out = htm_ex.model->forward(batch.input, htm_ex.schedule, at::make_generator<at::CPUGeneratorImpl>(0));
  ASSERT_EQ(out.output.sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_TRUE(total_log_prob(out).defined());  // the learned policy still learns, from the class loss
  EXPECT_TRUE(out.decoder_tokens.empty());
  EXPECT_LT(htm_ex.participating, htm_ex.parameters);  // the adapter's unlifter takes no part

  Experiment vit_ex = assemble(classify_config(dir, "vit"), htm::testing::plugins(), 0);
  auto logits = vit_ex.model->forward(batch.input, {}, at::make_generator<at::CPUGeneratorImpl>(0)).output;
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10}));
  const double ratio = static_cast<double>(vit_ex.participating) / static_cast<double>(htm_ex.participating);
  EXPECT_NEAR(ratio, 1.0, 0.1) << vit_ex.participating << " vs " << htm_ex.participating;
  EXPECT_THROW(
      assemble(classify_config(dir, "vit"), htm::testing::plugins(), 0)
          .model->forward_teacher_forced(batch.input, {}, at::make_generator<at::CPUGeneratorImpl>(0), nullptr),
      Error);
}

}  // namespace
}  // namespace htm
