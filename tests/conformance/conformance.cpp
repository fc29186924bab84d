// One conformance check looped over every plugin under test: shapes, gradients reaching the
// parameters they should, same seed → same output. `htm-conformance` (main.cpp) runs it on the
// plugins htm finds, or on the libraries and folders named on its command line (`htm
// check-plugin`); an in-tree plugin is covered by being built.
#include <filesystem>
#include <set>

#include <torch/torch.h>

#include "conformance.h"
#include "htm/adapter.h"
#include "htm/dataset.h"
#include "htm/loss.h"
#include "htm/merge.h"
#include "htm/policy.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

const Registry& registry() {
  static const Registry r(conformance::search_path());
  return r;
}

// The plugins of `kind` under test: all the registry found, or those loaded from the named files.
std::vector<std::string> names(PluginKind kind) {
  std::vector<std::string> out;
  for (const PluginEntry& entry : registry().entries())
    if (entry.manifest.kind == kind && conformance::under_test(entry.path)) out.push_back(entry.manifest.name);
  return out;
}

BuildContext small_context(std::vector<int64_t> sample_shape = {1, 8, 8}) {
  BuildContext ctx;
  ctx.dim = 16;
  ctx.heads = 2;
  ctx.mlp_ratio = 2;
  ctx.dropout = 0.0;
  ctx.sample_shape = std::move(sample_shape);
  ctx.num_classes = 10;
  return ctx;
}

// A command-line value (`--param NAME=VALUE`) read as the type of the parameter's default.
Value typed(const Value& like, const std::string& name, const std::string& text) {
  switch (type_of(like)) {
    case ValueType::string:
      return text;
    case ValueType::integer:
      return int64_t{std::stoll(text)};
    case ValueType::floating:
      return std::stod(text);
    case ValueType::boolean:
      if (text == "true" || text == "false") return text == "true";
      break;
    default:
      break;
  }
  throw Error("--param " + name + "=" + text + ": expected a " + type_name(type_of(like)));
}

// The torchscript policy and merge operator have no default module: the build scripts one of
// each (tests/python/policy.cmake: test-modules/policy.pt, merge.pt) where Debian's python3-torch
// is installed; `--param path=FILE` names another.
std::string torchscript_module(PluginKind kind) {
  for (const auto& [k, v] : conformance::params())
    if (k == "path") return v;
  const std::string built = std::string(HTM_CONFORMANCE_MODULES) + "/" + kind_name(kind) + ".pt";
  return std::filesystem::exists(built) ? built : "";
}

// A suite of one kind: a torchscript plugin without a module to load is skipped, saying why.
template <PluginKind kKind>
class KindConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "torchscript" && torchscript_module(kKind).empty())
      GTEST_SKIP() << "torchscript: no scripted module to check (python3-torch absent at build time); "
                      "htm check-plugin PLUGIN.so --param path=FILE.pt checks one";
  }
};

template <class T>
std::shared_ptr<T> make(PluginKind kind, const std::string& name, BuildContext ctx = small_context(),
                        Params params = {}) {
  Params p = registry().default_params(kind, name);
  if (name == "torchscript") p.set("path", torchscript_module(kind));
  for (const auto& [k, v] : params.values()) p.set(k, v);
  for (const auto& [k, text] : conformance::params())
    if (p.has(k)) p.set(k, typed(p.at(k), k, text));
  torch::manual_seed(0);
  return registry().create<T>(kind, name, p, ctx);
}

// Every parameter got a gradient, and at least one is non-zero.
void expect_gradients(torch::nn::Module& module, const std::string& what) {
  bool any_nonzero = false;
  for (const auto& p : module.named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << what << ": no gradient reaches " << p.key();
    any_nonzero |= p.value().grad().abs().sum().item<double>() > 0;
  }
  if (!module.parameters().empty()) EXPECT_TRUE(any_nonzero) << what << ": all gradients are zero";
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) { return info.param; }

// ---------------------------------------------------------------------------------------------
class PolicyConformance : public KindConformance<PluginKind::policy> {};
// Checking one plugin leaves the other kinds with nothing to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PolicyConformance);

MergeContext merge_context(const torch::Tensor& tokens, int64_t r, uint64_t seed) {
  MergeContext ctx;
  ctx.tokens = tokens;
  ctx.r = r;
  ctx.attention = torch::softmax(torch::randn({tokens.size(0), tokens.size(1), tokens.size(1)}), -1);
  ctx.cross_keys = torch::randn(tokens.sizes());
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  // A truth for oracle policies: tokens 2k and 2k+1 are siblings.
  const int64_t T = tokens.size(1);
  ctx.siblings = torch::zeros({tokens.size(0), T, T});
  for (int64_t k = 0; k + 1 < T; k += 2)
    ctx.siblings.select(1, k).select(1, k + 1).fill_(1), ctx.siblings.select(1, k + 1).select(1, k).fill_(1);
  return ctx;
}

UnmergeContext unmerge_context(const torch::Tensor& tokens, int64_t r, uint64_t seed) {
  UnmergeContext ctx;
  ctx.tokens = tokens;
  ctx.r = r;
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return ctx;
}

TEST_P(PolicyConformance, DecisionsAreValidAndTheirLogProbsTrainThePolicy) {
  auto policy = make<Policy>(PluginKind::policy, GetParam());
  auto tokens = torch::randn({3, 10, 16}, torch::requires_grad());
  MergeDecision d = policy->choose_merges(merge_context(tokens, 4, 1));
  ASSERT_EQ(d.src.sizes(), (std::vector<int64_t>{3, 4}));
  ASSERT_EQ(d.dst.sizes(), (std::vector<int64_t>{3, 4}));
  for (int64_t b = 0; b < 3; ++b) {
    std::set<int64_t> used;
    for (int64_t k = 0; k < 4; ++k) {
      const int64_t i = d.src[b][k].item<int64_t>(), j = d.dst[b][k].item<int64_t>();
      EXPECT_NE(i, j);
      EXPECT_TRUE(i >= 0 && i < 10 && j >= 0 && j < 10);
      EXPECT_TRUE(used.insert(i).second && used.insert(j).second);
    }
  }
  auto decoder_tokens = torch::randn({3, 7, 16}, torch::requires_grad());
  UnmergeDecision u = policy->choose_unmerges(unmerge_context(decoder_tokens, 3, 2));
  ASSERT_EQ(u.index.sizes(), (std::vector<int64_t>{3, 3}));
  for (int64_t b = 0; b < 3; ++b) {
    std::set<int64_t> seen;
    for (int64_t k = 0; k < 3; ++k) EXPECT_TRUE(seen.insert(u.index[b][k].item<int64_t>()).second);
    EXPECT_TRUE(*seen.begin() >= 0 && *seen.rbegin() < 7);
  }

  // Log-probabilities: per decision, ≤ 0, and together they reach every policy parameter.
  torch::Tensor total = torch::zeros({});
  for (const auto& lp : {d.log_prob, u.log_prob}) {
    if (!lp.defined()) continue;
    EXPECT_TRUE(torch::isfinite(lp).all().item<bool>());
    EXPECT_LE(lp.max().item<double>(), 1e-6);
    total = total + lp.sum();
  }
  if (d.log_prob.defined()) EXPECT_EQ(d.log_prob.sizes(), d.src.sizes());
  if (u.log_prob.defined()) EXPECT_EQ(u.log_prob.sizes(), u.index.sizes());
  if (!total.requires_grad()) {
    EXPECT_TRUE(policy->parameters().empty()) << "a policy with parameters returns no log-probabilities";
    return;
  }
  total.backward();
  expect_gradients(*policy, GetParam() + " log-probabilities");
  // The estimator trains the policy only: its term must not reach the model's tokens.
  EXPECT_FALSE(tokens.grad().defined() && tokens.grad().abs().sum().item<double>() > 0);
  EXPECT_FALSE(decoder_tokens.grad().defined() && decoder_tokens.grad().abs().sum().item<double>() > 0);
}

TEST_P(PolicyConformance, SameSeedSameDecisions) {
  auto policy = make<Policy>(PluginKind::policy, GetParam());
  auto tokens = torch::randn({2, 12, 16});
  torch::manual_seed(5);
  auto a = policy->choose_merges(merge_context(tokens, 5, 42));
  torch::manual_seed(5);
  auto b = policy->choose_merges(merge_context(tokens, 5, 42));
  EXPECT_TRUE(torch::equal(a.src, b.src) && torch::equal(a.dst, b.dst));
}

// merge_logits, as htm/policy.h states it: optional; when a learning policy gives it, the
// distribution its merges are drawn from, read through the host's logit bound.
TEST_P(PolicyConformance, MergeLogitsWhereGivenAreTheSampledDistribution) {
  auto policy = make<Policy>(PluginKind::policy, GetParam());
  auto tokens = torch::randn({3, 10, 16});
  MergeContext ctx = merge_context(tokens, 4, 1);
  auto logits = policy->merge_logits(ctx);
  if (logits.defined()) {
    ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{3, 10, 10}));
    for (double bound : {0.0, 0.7})
      for (LogProbForm form : {LogProbForm::exact, LogProbForm::paper}) {
        ctx.log_prob_form = form;
        ctx.logit_bound = bound;
        MergeDecision d = policy->choose_merges(ctx);
        if (d.log_prob.defined())
          EXPECT_TRUE(torch::allclose(d.log_prob, pair_log_prob(logits, d.src, d.dst, form, bound), 1e-5, 1e-5))
              << GetParam() << ": log_prob is not pair_log_prob(merge_logits, ...) with logit_bound " << bound;
      }
  }
  // Teacher forcing: forced unmerges come back as given.
  UnmergeContext u = unmerge_context(torch::randn({3, 7, 16}), 2, 2);
  u.forced = torch::tensor({0, 5, 6, 1, 2, 3}, torch::kLong).view({3, 2});
  EXPECT_TRUE(torch::equal(policy->choose_unmerges(u).index, u.forced));
}

INSTANTIATE_TEST_SUITE_P(All, PolicyConformance, ::testing::ValuesIn(names(PluginKind::policy)), param_name);

// ---------------------------------------------------------------------------------------------
class MergeConformance : public KindConformance<PluginKind::merge> {};
// Checking one plugin leaves the other kinds with nothing to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MergeConformance);

TEST_P(MergeConformance, ShapesGradientsAndDeterminism) {
  auto op = make<MergeOperator>(PluginKind::merge, GetParam());
  // 64 pairs, so that an operator routing pairs among experts sends some to every expert.
  auto a = torch::randn({64, 16}, torch::requires_grad()), b = torch::randn({64, 16}, torch::requires_grad());
  auto merged = op->merge(a, b);
  ASSERT_EQ(merged.sizes(), (std::vector<int64_t>{64, 16}));
  auto [first, second] = op->unmerge(merged);
  ASSERT_EQ(first.sizes(), (std::vector<int64_t>{64, 16}));
  ASSERT_EQ(second.sizes(), (std::vector<int64_t>{64, 16}));
  (first.pow(2).sum() + second.sum()).backward();
  expect_gradients(*op, GetParam());
  EXPECT_GT(a.grad().abs().sum().item<double>(), 0);
  EXPECT_GT(b.grad().abs().sum().item<double>(), 0);
  torch::NoGradGuard no_grad;
  op->eval();
  EXPECT_TRUE(torch::equal(op->merge(a, b), op->merge(a, b)));
}

INSTANTIATE_TEST_SUITE_P(All, MergeConformance, ::testing::ValuesIn(names(PluginKind::merge)), param_name);

// ---------------------------------------------------------------------------------------------
class LossConformance : public ::testing::TestWithParam<std::string> {};
// Checking one plugin leaves the other kinds with nothing to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LossConformance);

// What each loss is given: a reconstruction by default; a new loss that needs something else
// (class logits, a teacher-forced pass) adds its case here.
LossContext loss_case(const std::string& name) {
  auto grad = torch::requires_grad();
  LossContext ctx;
  ctx.input = torch::rand({4, 1, 8, 8}) * 2 - 1;
  ctx.output = torch::randn({4, 1, 8, 8}, grad);
  ctx.labels = torch::randint(10, {4}, torch::kLong);
  ctx.encoder_tokens = {torch::randn({4, 16, 16}, grad), torch::randn({4, 8, 16}, grad)};
  ctx.decoder_tokens = {torch::randn({4, 16, 16}, grad), torch::randn({4, 8, 16}, grad)};
  if (name == "cross_entropy") ctx.output = torch::randn({4, 10}, grad);
  if (name == "point_set") {  // sets of 6 segments
    ctx.input = torch::rand({4, 6, 4}) * 2 - 1;
    ctx.output = torch::randn({4, 6, 4}, grad);
  }
  if (name == "teacher_forcing") {
    ctx.teacher_forced = true;
    ctx.merge_log_probs = {torch::randn({4, 8}, grad), torch::randn({4, 4}, grad)};
    ctx.unmerge_log_probs = {torch::randn({4, 8}, grad), torch::randn({4, 4}, grad)};
  }
  return ctx;
}

double grad_sum(const std::vector<torch::Tensor>& tensors) {
  double sum = 0;
  for (const auto& t : tensors) sum += t.grad().defined() ? t.grad().abs().sum().item<double>() : 0;
  return sum;
}

TEST_P(LossConformance, PerSampleValuesWithGradients) {
  auto loss = make<Loss>(PluginKind::loss, GetParam());
  LossContext ctx = loss_case(GetParam());
  auto value = loss->per_sample(ctx);
  ASSERT_EQ(value.sizes(), (std::vector<int64_t>{4}));
  EXPECT_TRUE(torch::isfinite(value).all().item<bool>());
  value.sum().backward();
  const double reached = grad_sum({ctx.output}) + grad_sum(ctx.decoder_tokens) + grad_sum(ctx.encoder_tokens);
  EXPECT_GT(reached, 0) << "the loss depends on neither the model's output nor its tokens";
  EXPECT_TRUE(torch::equal(value.detach(), loss->per_sample(ctx).detach()));
}

TEST_P(LossConformance, LayerEntryKeepsShapeAndIsSeeded) {
  auto loss = make<Loss>(PluginKind::loss, GetParam());
  auto tokens = torch::randn({4, 16, 16});
  auto entry = [](uint64_t seed) { return LayerEntry{1, 0, 0, true, at::make_generator<at::CPUGeneratorImpl>(seed)}; };
  auto a = loss->enter_layer(tokens, entry(3)), b = loss->enter_layer(tokens, entry(3));
  ASSERT_EQ(a.sizes(), tokens.sizes());
  EXPECT_TRUE(torch::equal(a, b)) << "the same generator seed must give the same tokens";
  EXPECT_GE(loss->teacher_forced_steps(), 0);
}

INSTANTIATE_TEST_SUITE_P(All, LossConformance, ::testing::ValuesIn(names(PluginKind::loss)), param_name);

// ---------------------------------------------------------------------------------------------
// A sample shape and parameters per adapter: a new adapter must say what data it takes.
struct AdapterCase {
  std::vector<int64_t> sample_shape;
  Params params;
  bool set = false;  ///< unlift() makes one element per token (a set), not a whole sample
};
AdapterCase adapter_case(const std::string& name) {
  if (name == "image") return {{1, 8, 8}, Params({{"patch", int64_t{2}}, {"fourier_bands", int64_t{4}}})};
  if (name == "points") return {{6, 4}, Params({{"fourier_bands", int64_t{2}}}), true};
  ADD_FAILURE() << "conformance_test.cpp has no sample shape for adapter '" << name << "'";
  return {};
}

class AdapterConformance : public ::testing::TestWithParam<std::string> {};
// Checking one plugin leaves the other kinds with nothing to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AdapterConformance);

TEST_P(AdapterConformance, LiftAndUnliftShapesAndGradients) {
  AdapterCase c = adapter_case(GetParam());
  auto adapter = make<Adapter>(PluginKind::adapter, GetParam(), small_context(c.sample_shape), c.params);
  std::vector<int64_t> batch_shape = {3};
  batch_shape.insert(batch_shape.end(), c.sample_shape.begin(), c.sample_shape.end());
  auto x = torch::rand(batch_shape) * 2 - 1;
  auto tokens = adapter->lift(x);
  ASSERT_EQ(tokens.sizes(), (std::vector<int64_t>{3, adapter->num_tokens(), 16}));
  auto decoder_tokens = torch::randn({3, 5, 16}, torch::requires_grad());
  auto y = adapter->unlift(decoder_tokens);
  const std::vector<int64_t> expected = c.set ? std::vector<int64_t>{3, 5, c.sample_shape[1]} : x.sizes().vec();
  ASSERT_EQ(y.sizes(), expected);
  (tokens.pow(2).sum() + y.pow(2).sum()).backward();
  expect_gradients(*adapter, GetParam());
  EXPECT_GT(decoder_tokens.grad().abs().sum().item<double>(), 0);
  torch::NoGradGuard no_grad;
  adapter->eval();
  EXPECT_TRUE(torch::equal(adapter->lift(x), adapter->lift(x)));
}

INSTANTIATE_TEST_SUITE_P(All, AdapterConformance, ::testing::ValuesIn(names(PluginKind::adapter)), param_name);

// ---------------------------------------------------------------------------------------------
// Parameters per dataset so the test has data to read (CIFAR-10: a tiny file it writes).
Params dataset_params(const std::string& name) {
  if (name == "cifar10") {
    static const std::string dir = [] {
      auto d = std::filesystem::path(::testing::TempDir()) / "htm-conformance-cifar";
      std::filesystem::create_directories(d);
      htm::testing::write_tiny_cifar(d.string(), 12, 5);
      return d.string();
    }();
    return Params({{"root", dir}, {"train_files", std::vector<std::string>{"data_batch_1.bin"}}});
  }
  if (name == "crosses" || name == "trees") return Params({{"train_size", int64_t{8}}, {"test_size", int64_t{4}}});
  return {};
}

class DatasetConformance : public ::testing::TestWithParam<std::string> {};
// Checking one plugin leaves the other kinds with nothing to check.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DatasetConformance);

TEST_P(DatasetConformance, SamplesHaveTheDeclaredShapeRangeAndLabels) {
  if (GetParam() == "fashion_mnist") HTM_SKIP_WITHOUT_FASHION_MNIST();
  auto data = make<Dataset>(PluginKind::dataset, GetParam(), BuildContext{}, dataset_params(GetParam()));
  const auto shape = data->sample_shape();
  ASSERT_FALSE(shape.empty());
  ASSERT_GT(data->size(Split::train), 2);
  ASSERT_GT(data->size(Split::test), 0);
  auto idx = torch::tensor({2, 0, 1}, torch::kLong);
  Batch b = data->get(Split::train, idx);
  std::vector<int64_t> expected = {3};
  expected.insert(expected.end(), shape.begin(), shape.end());
  ASSERT_EQ(b.input.sizes(), expected);
  EXPECT_EQ(b.input.scalar_type(), torch::kFloat);
  EXPECT_GE(b.input.min().item<double>(), -1.0);
  EXPECT_LE(b.input.max().item<double>(), 1.0);
  if (data->num_classes() > 0) {
    ASSERT_EQ(b.labels.sizes(), (std::vector<int64_t>{3}));
    EXPECT_GE(b.labels.min().item<int64_t>(), 0);
    EXPECT_LT(b.labels.max().item<int64_t>(), data->num_classes());
  }
  EXPECT_TRUE(torch::equal(b.input, data->get(Split::train, idx).input));
  if (b.tree.defined()) {  // a known hierarchy: a full binary tree over the sample's tokens
    ASSERT_EQ(shape.size(), 2u);
    ASSERT_EQ(b.tree.sizes(), (std::vector<int64_t>{3, shape[0] - 1, 2}));
    EXPECT_GE(b.tree.min().item<int64_t>(), 0);
    EXPECT_LT(b.tree.max().item<int64_t>(), 2 * shape[0] - 2);
  }
}

INSTANTIATE_TEST_SUITE_P(All, DatasetConformance, ::testing::ValuesIn(names(PluginKind::dataset)), param_name);

}  // namespace
}  // namespace htm
