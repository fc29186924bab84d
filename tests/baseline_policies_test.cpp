// The non-learned baseline policies `nearest` (greedy closest pairs) and `tome` (ToMe's bipartite
// soft matching, one to one) against references written out here: brute-force greedy matchers
// over all pairs, ToMe's own rule (tome/merge.py), and the softmax their draws claim to follow;
// and the learned `bilinear` form against its matrices, layer by layer.
#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include <torch/torch.h>

#include "htm/greedy_pairs.h"
#include "htm/policy.h"
#include "kernels/kernels.h"
#include "plugins_util.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

// `layers`: the model's merging layers as the host says them (SDK 6.3); 0 where it does not.
std::shared_ptr<Policy> make_policy(const std::string& name, const Params& overrides = {}, int64_t layers = 0) {
  Params params = htm::testing::plugins().default_params(PluginKind::policy, name);
  for (const auto& [key, value] : overrides.values()) params.set(key, value);
  BuildContext build;
  build.dim = 8;
  build.heads = 2;
  build.layers = layers;
  return htm::testing::plugins().create<Policy>(PluginKind::policy, name, params, build);
}

// The message of the htm::Error that building `name` with `overrides` throws.
std::string build_error(const std::string& name, const Params& overrides, int64_t layers = 0) {
  return htm::testing::error_of([&] { make_policy(name, overrides, layers); });
}

MergeContext merge_context(const torch::Tensor& tokens, int64_t r, uint64_t seed = 1) {
  MergeContext ctx;
  ctx.tokens = tokens;
  ctx.r = r;
  ctx.generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return ctx;
}

Pairs pairs_of(const MergeDecision& d, int64_t b = 0) {
  Pairs out;
  for (int64_t k = 0; k < d.src.size(1); ++k)
    out.emplace_back(d.src[b][k].item<int64_t>(), d.dst[b][k].item<int64_t>());
  return out;
}

Pairs sorted(Pairs pairs) {
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

// Reference matcher: every candidate edge (score, i, j) sorted by descending score, ties to the
// lower i·T + j, accepted while both its tokens are unused.
Pairs brute_force_greedy(std::vector<std::tuple<double, int64_t, int64_t>> edges, int64_t T, int64_t r) {
  std::sort(edges.begin(), edges.end(), [T](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    return std::get<1>(a) * T + std::get<2>(a) < std::get<1>(b) * T + std::get<2>(b);
  });
  std::vector<char> used(T, 0);
  Pairs out;
  for (const auto& [score, i, j] : edges) {
    if (static_cast<int64_t>(out.size()) == r) break;
    if (used[i] || used[j]) continue;
    used[i] = used[j] = 1;
    out.emplace_back(i, j);
  }
  return out;
}

// Distance between tokens i and j of x (T×C), in double.
double distance(const torch::Tensor& x, int64_t i, int64_t j, bool cosine) {
  auto a = x[i].to(torch::kDouble), b = x[j].to(torch::kDouble);
  if (!cosine) return (a - b).norm().item<double>();
  return 1 - (a.dot(b) / (a.norm() * b.norm())).item<double>();
}

double cosine_similarity(const torch::Tensor& x, int64_t i, int64_t j) { return 1 - distance(x, i, j, true); }

// Histogram of the first merged pair (i·T + j) over the rows of a batch of identical samples.
std::vector<double> first_pair_counts(const MergeDecision& d, int64_t T) {
  auto counts = torch::bincount(d.src.select(1, 0) * T + d.dst.select(1, 0), {}, T * T).to(torch::kDouble);
  return std::vector<double>(counts.data_ptr<double>(), counts.data_ptr<double>() + T * T);
}

// ---------------------------------------------------------------------------------------------
// nearest

TEST(NearestPolicy, TakesTheObviousClosestPairsTightestFirst) {
  // Four far-apart clusters of two tokens, the pairs (0,5), (1,3), (2,7), (4,6) at spreads
  // 0.01, 0.02, 0.03, 0.04.
  auto tokens = torch::zeros({1, 8, 3});
  const Pairs truth = {{0, 5}, {1, 3}, {2, 7}, {4, 6}};
  for (size_t k = 0; k < truth.size(); ++k) {
    tokens[0][truth[k].first][0] = 10.0 * static_cast<double>(k);
    tokens[0][truth[k].second][0] = 10.0 * static_cast<double>(k);
    tokens[0][truth[k].second][1] = 0.01 * static_cast<double>(k + 1);
  }
  auto nearest = make_policy("nearest");
  EXPECT_EQ(pairs_of(nearest->choose_merges(merge_context(tokens, 4))), truth);
  EXPECT_EQ(pairs_of(nearest->choose_merges(merge_context(tokens, 2))), Pairs(truth.begin(), truth.begin() + 2));
}

TEST(NearestPolicy, GreedyEqualsBruteForceGreedyOverAllPairs) {
  torch::manual_seed(3);
  for (const bool cosine : {false, true}) {
    auto nearest = make_policy("nearest", Params({{"distance", std::string(cosine ? "cosine" : "euclidean")}}));
    for (const int64_t T : {12, 13, 40}) {
      auto tokens = torch::randn({3, T, 5});
      for (const int64_t r : {int64_t{1}, T / 3, T / 2}) {
        MergeDecision d = nearest->choose_merges(merge_context(tokens, r));
        EXPECT_FALSE(d.log_prob.defined() || d.entropy.defined()) << "nothing is learned";
        for (int64_t b = 0; b < 3; ++b) {
          std::vector<std::tuple<double, int64_t, int64_t>> edges;
          for (int64_t i = 0; i < T; ++i)
            for (int64_t j = i + 1; j < T; ++j) edges.emplace_back(-distance(tokens[b], i, j, cosine), i, j);
          EXPECT_EQ(pairs_of(d, b), brute_force_greedy(edges, T, r))
              << (cosine ? "cosine" : "euclidean") << ", T = " << T << ", r = " << r << ", sample " << b;
        }
      }
    }
  }
}

TEST(NearestPolicy, CosineAndEuclideanPairDifferentTokens) {
  // 0 and 1 point the same way, as do 2 and 3; 0 and 2 are the closest in space.
  auto tokens = torch::tensor({1.0, 0.0, 4.0, 0.0, 1.0, 1.2, 4.0, 4.8}).view({1, 4, 2});
  auto euclidean = make_policy("nearest");
  auto cosine = make_policy("nearest", Params({{"distance", std::string("cosine")}}));
  EXPECT_EQ(pairs_of(euclidean->choose_merges(merge_context(tokens, 2))), (Pairs{{0, 2}, {1, 3}}));
  EXPECT_EQ(sorted(pairs_of(cosine->choose_merges(merge_context(tokens, 2)))), (Pairs{{0, 1}, {2, 3}}));
}

TEST(NearestPolicy, MergeLogitsAreMinusTheDistanceOverTheTemperature) {
  torch::manual_seed(4);
  auto tokens = torch::randn({2, 6, 4});
  auto d = torch::cdist(tokens.to(torch::kDouble), tokens.to(torch::kDouble)).to(torch::kFloat);
  auto greedy = make_policy("nearest");
  auto warm = make_policy("nearest", Params({{"temperature", 0.5}}));
  EXPECT_TRUE(torch::allclose(greedy->merge_logits(merge_context(tokens, 2)), -d, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(warm->merge_logits(merge_context(tokens, 2)), -d / 0.5, 1e-5, 1e-5));
  // At temperature 0 the first pair is the logits' off-diagonal maximum.
  auto logits = greedy->merge_logits(merge_context(tokens, 2)).masked_fill(torch::eye(6, torch::kBool), -1e30);
  MergeDecision first = greedy->choose_merges(merge_context(tokens, 1));
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t flat = logits[b].argmax().item<int64_t>();
    EXPECT_EQ(sorted(pairs_of(first, b)), (Pairs{{std::min(flat / 6, flat % 6), std::max(flat / 6, flat % 6)}}));
  }
}

TEST(NearestPolicy, SampledPairsFollowTheSoftmaxOfMinusDistance) {
  const int64_t T = 4, n = 40000;
  const double temperature = 0.5;
  torch::manual_seed(5);
  auto one = torch::randn({1, T, 3});
  auto nearest = make_policy("nearest", Params({{"temperature", temperature}}));
  auto counts = first_pair_counts(nearest->choose_merges(merge_context(one.expand({n, T, 3}).contiguous(), 1, 7)), T);
  std::vector<double> probs(T * T, 0);
  double z = 0;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (i != j) z += probs[i * T + j] = std::exp(-distance(one[0], i, j, false) / temperature);
  for (double& p : probs) p /= z;
  auto [stat, df] = htm::testing::chi_square(counts, probs, n);
  EXPECT_LT(stat, htm::testing::chi_square_bound(df));
  std::vector<double> uniform(T * T, 1.0 / (T * (T - 1)));
  for (int64_t i = 0; i < T; ++i) uniform[i * T + i] = 0;
  EXPECT_GT(htm::testing::chi_square(counts, uniform, n).first, htm::testing::chi_square_bound(df));
}

TEST(NearestPolicy, SameSeedSameDrawsAndGreedyIgnoresTheSeed) {
  torch::manual_seed(6);
  auto tokens = torch::randn({4, 10, 4});
  auto warm = make_policy("nearest", Params({{"temperature", 0.3}}));
  auto a = warm->choose_merges(merge_context(tokens, 4, 11)), b = warm->choose_merges(merge_context(tokens, 4, 11));
  auto c = warm->choose_merges(merge_context(tokens, 4, 12));
  EXPECT_TRUE(torch::equal(a.src, b.src) && torch::equal(a.dst, b.dst));
  EXPECT_FALSE(torch::equal(a.src, c.src) && torch::equal(a.dst, c.dst));
  auto greedy = make_policy("nearest");
  auto g = greedy->choose_merges(merge_context(tokens, 4, 11)), h = greedy->choose_merges(merge_context(tokens, 4, 12));
  EXPECT_TRUE(torch::equal(g.src, h.src) && torch::equal(g.dst, h.dst));
}

TEST(NearestPolicy, RefusesBadParameters) {
  const std::string distance = build_error("nearest", Params({{"distance", std::string("manhattan")}}));
  EXPECT_THAT(distance, ::testing::AllOf(::testing::HasSubstr("\"euclidean\""), ::testing::HasSubstr("\"cosine\""),
                                         ::testing::HasSubstr("manhattan")));
  EXPECT_THAT(build_error("nearest", Params({{"temperature", -1.0}})), ::testing::HasSubstr("temperature"));
}

// ---------------------------------------------------------------------------------------------
// residual: nearest's logits plus a gated learned term

// At its first step the residual policy's logits are nearest's at the same temperature, to the
// bit: the gate starts at 0, so the learned term adds nothing.
TEST(ResidualPolicy, StartsAtNearestsLogits) {
  torch::manual_seed(3);
  auto tokens = torch::randn({2, 7, 8});
  for (const char* distance : {"euclidean", "cosine"}) {
    SCOPED_TRACE(distance);
    auto residual = make_policy("residual", Params({{"distance", std::string(distance)}, {"temperature", 0.25}}));
    auto nearest = make_policy("nearest", Params({{"distance", std::string(distance)}, {"temperature", 0.25}}));
    auto ctx = merge_context(tokens, 3);
    auto ours = residual->merge_logits(ctx), theirs = nearest->merge_logits(ctx);
    EXPECT_TRUE(torch::allclose(ours.detach(), theirs, 1e-5, 1e-6));
  }
}

// The score function's gradient reaches the gate and the inverse temperature at once, and the
// bilinear term's weights once the gate is open; the tokens themselves get none (detached).
TEST(ResidualPolicy, GradientsReachTheGateTheTemperatureAndThenTheResidual) {
  torch::manual_seed(4);
  auto policy = make_policy("residual");
  auto tokens = torch::randn({3, 8, 8}).requires_grad_(true);
  auto named = policy->named_parameters();
  auto grads_of_log_prob = [&] {
    policy->zero_grad();
    auto d = policy->choose_merges(merge_context(tokens, 4));
    EXPECT_TRUE(d.log_prob.defined() && d.entropy.defined());
    d.log_prob.sum().backward();
  };
  grads_of_log_prob();
  EXPECT_GT(named["gate"].grad().abs().sum().item<double>(), 0);
  EXPECT_GT(named["log_inverse_temperature"].grad().abs().sum().item<double>(), 0);
  EXPECT_FALSE(tokens.grad().defined());
  {
    torch::NoGradGuard no_grad;
    named["gate"].fill_(1.0);
  }
  grads_of_log_prob();
  EXPECT_GT(named["query.weight"].grad().abs().sum().item<double>(), 0);
  EXPECT_GT(named["key.weight"].grad().abs().sum().item<double>(), 0);
}

// residual = false with a fixed temperature is nearest sampled at that temperature: nothing
// learns, so no log-probabilities; uniform unmerges bring no scorer.
TEST(ResidualPolicy, WithoutResidualAndFixedTemperatureNothingLearns) {
  auto policy = make_policy(
      "residual", Params({{"residual", false}, {"learn_temperature", false}, {"unmerges", std::string("uniform")}}));
  for (const auto& p : policy->parameters()) EXPECT_FALSE(p.requires_grad());
  auto d = policy->choose_merges(merge_context(torch::randn({2, 6, 8}), 3));
  EXPECT_FALSE(d.log_prob.defined());
  UnmergeContext u;
  u.tokens = torch::randn({2, 3, 8});
  u.r = 2;
  u.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_FALSE(policy->choose_unmerges(u).log_prob.defined());
  auto learned_unmerges = make_policy("residual");
  EXPECT_TRUE(learned_unmerges->choose_unmerges(u).log_prob.defined());
}

TEST(ResidualPolicy, RefusesBadParameters) {
  EXPECT_THAT(build_error("residual", Params({{"temperature", 0.0}})), ::testing::HasSubstr("temperature"));
  EXPECT_THAT(build_error("residual", Params({{"temperature", std::numeric_limits<double>::infinity()}})),
              ::testing::HasSubstr("temperature must be a finite number above 0, got inf"));
  EXPECT_THAT(build_error("residual", Params({{"unmerges", std::string("mirror")}})), ::testing::HasSubstr("unmerges"));
  EXPECT_THAT(build_error("residual", Params({{"distance", std::string("l1")}})), ::testing::HasSubstr("distance"));
  EXPECT_THAT(build_error("residual", Params({{"heads", int64_t{3}}})), ::testing::HasSubstr("heads"));
}

// ---------------------------------------------------------------------------------------------
// tome

// ToMe's bipartite_soft_matching (facebookresearch/ToMe, tome/merge.py) on tokens B×T×C: each A
// (even) token's best B (odd) token, the r A tokens with the best matches merged into theirs.
// Returns {src, dst} as token indices, B×r each, in ToMe's order.
std::pair<torch::Tensor, torch::Tensor> tome_reference(const torch::Tensor& tokens, int64_t r) {
  auto metric = tokens / tokens.norm(2, -1, true);
  const int64_t T = tokens.size(1);
  auto scores = torch::bmm(metric.slice(1, 0, T, 2), metric.slice(1, 1, T, 2).transpose(1, 2));
  auto [node_max, node_idx] = scores.max(-1);
  auto src_idx = torch::argsort(node_max, -1, /*descending=*/true).slice(1, 0, r);
  auto dst_idx = node_idx.gather(1, src_idx);
  return {src_idx * 2, dst_idx * 2 + 1};
}

TEST(TomePolicy, PairsEvenIntoOddOneToOneMostSimilarEdgesFirst) {
  torch::manual_seed(8);
  auto tome = make_policy("tome");
  for (const int64_t T : {10, 11, 31}) {
    auto tokens = torch::randn({3, T, 6});
    for (const int64_t r : {int64_t{1}, T / 3, T / 2}) {
      MergeDecision d = tome->choose_merges(merge_context(tokens, r));
      EXPECT_FALSE(d.log_prob.defined() || d.entropy.defined()) << "nothing is learned";
      for (int64_t b = 0; b < 3; ++b) {
        std::vector<std::tuple<double, int64_t, int64_t>> edges;
        for (int64_t i = 0; i < T; i += 2)
          for (int64_t j = 1; j < T; j += 2) edges.emplace_back(cosine_similarity(tokens[b], i, j), i, j);
        Pairs pairs = pairs_of(d, b);
        EXPECT_EQ(pairs, brute_force_greedy(edges, T, r)) << "T = " << T << ", r = " << r << ", sample " << b;
        for (const auto& [i, j] : pairs) EXPECT_TRUE(i % 2 == 0 && j % 2 == 1) << i << "→" << j;
      }
    }
  }
}

TEST(TomePolicy, EqualsToMeWhenTheBestMatchesAreDistinct) {
  // Each even token is a noisy copy of the odd token after it: its best match, a different one
  // for every even token.
  torch::manual_seed(9);
  const int64_t T = 12, r = 4;
  auto tokens = torch::randn({2, T, 8});
  for (int64_t k = 0; k < T; k += 2)
    tokens.select(1, k).copy_(tokens.select(1, k + 1) + 0.1 * (k + 1) * torch::randn({2, 8}));
  auto [src, dst] = tome_reference(tokens, r);
  for (int64_t b = 0; b < 2; ++b) EXPECT_EQ(std::get<0>(at::_unique(dst[b])).numel(), r) << "the precondition";
  MergeDecision d = make_policy("tome")->choose_merges(merge_context(tokens, r));
  EXPECT_TRUE(torch::equal(d.src, src) && torch::equal(d.dst, dst)) << d.src << d.dst << src << dst;
}

TEST(TomePolicy, AnEvenTokenWhoseBestMatchIsTakenFallsBackToItsBestFreeOne) {
  // Both even tokens are closest to token 1; ToMe would merge both into it.
  auto tokens = torch::tensor({1.0, 0.1, 1.0, 0.0, 1.0, 0.3, 0.0, 1.0}).view({1, 4, 2});
  auto [src, dst] = tome_reference(tokens, 2);
  EXPECT_EQ(dst[0][0].item<int64_t>(), 1);
  EXPECT_EQ(dst[0][1].item<int64_t>(), 1);
  EXPECT_EQ(pairs_of(make_policy("tome")->choose_merges(merge_context(tokens, 2))), (Pairs{{0, 1}, {2, 3}}));
}

TEST(TomePolicy, KeysModeComparesTheCrossAttentionKeys) {
  // The tokens pair 0 with 1 and 2 with 3; the keys pair 0 with 3 and 2 with 1.
  auto tokens = torch::tensor({1.0, 0.0, 1.0, 0.05, 0.0, 1.0, 0.05, 1.0}).view({1, 4, 2});
  auto keys = torch::tensor({0.0, 1.0, 1.0, 0.05, 1.0, 0.0, 0.05, 1.0}).view({1, 4, 2});
  auto by_tokens = make_policy("tome");
  auto by_keys = make_policy("tome", Params({{"similarity", std::string("keys")}}));
  EXPECT_FALSE(by_tokens->needs_cross_keys());
  EXPECT_TRUE(by_keys->needs_cross_keys());
  MergeContext ctx = merge_context(tokens, 2);
  ctx.cross_keys = keys.clone().requires_grad_(true);
  EXPECT_EQ(sorted(pairs_of(by_tokens->choose_merges(ctx))), (Pairs{{0, 1}, {2, 3}}));
  EXPECT_EQ(sorted(pairs_of(by_keys->choose_merges(ctx))), (Pairs{{0, 3}, {2, 1}}));
  EXPECT_FALSE(by_keys->merge_logits(ctx).requires_grad()) << "the keys are read detached";
  EXPECT_THAT(htm::testing::error_of([&] { by_keys->choose_merges(merge_context(tokens, 2)); }),
              ::testing::HasSubstr("cross_attention"));
}

TEST(TomePolicy, MergeLogitsHoldTheEdgesAndNothingElse) {
  torch::manual_seed(10);
  const int64_t T = 7;
  auto tokens = torch::randn({2, T, 5});
  auto greedy = make_policy("tome")->merge_logits(merge_context(tokens, 3));
  auto warm = make_policy("tome", Params({{"temperature", 0.25}}))->merge_logits(merge_context(tokens, 3));
  ASSERT_EQ(greedy.sizes(), (std::vector<int64_t>{2, T, T}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const bool edge = i % 2 == 0 && j % 2 == 1;
        const double expected = edge ? cosine_similarity(tokens[b], i, j) : -1e9;
        EXPECT_NEAR(greedy[b][i][j].item<double>(), expected, 1e-5);
        EXPECT_NEAR(warm[b][i][j].item<double>(), edge ? expected / 0.25 : -1e9, 1e-4);
      }
  // The exact log-probability helper copes with the −1e9 entries: finite, and an edge's value.
  auto lp = pair_log_prob(warm, torch::tensor({0, 2}, torch::kLong).view({2, 1}),
                          torch::tensor({1, 5}, torch::kLong).view({2, 1}), LogProbForm::exact);
  EXPECT_TRUE(torch::isfinite(lp).all().item<bool>());
}

TEST(TomePolicy, SampledEdgesFollowTheSoftmaxOfSimilarityAndStayEvenToOdd) {
  const int64_t T = 4, n = 40000;
  const double temperature = 0.25;
  torch::manual_seed(11);
  auto one = torch::randn({1, T, 3});
  auto tome = make_policy("tome", Params({{"temperature", temperature}}));
  auto counts = first_pair_counts(tome->choose_merges(merge_context(one.expand({n, T, 3}).contiguous(), 1, 7)), T);
  std::vector<double> probs(T * T, 0);
  double z = 0;
  for (int64_t i = 0; i < T; i += 2)
    for (int64_t j = 1; j < T; j += 2) z += probs[i * T + j] = std::exp(cosine_similarity(one[0], i, j) / temperature);
  for (int64_t k = 0; k < T * T; ++k) {
    probs[k] /= z;
    if (probs[k] == 0) EXPECT_EQ(counts[k], 0) << "pair " << k / T << "→" << k % T << " is not an edge";
  }
  auto [stat, df] = htm::testing::chi_square(counts, probs, n);
  EXPECT_LT(stat, htm::testing::chi_square_bound(df));
  // However cold, and with every B token taken: only even→odd, one to one.
  auto cold = make_policy("tome", Params({{"temperature", 1e-4}}));
  auto tokens = torch::randn({8, 9, 3});
  MergeDecision d = cold->choose_merges(merge_context(tokens, 4, 3));
  EXPECT_TRUE((d.src.remainder(2) == 0).all().item<bool>() && (d.dst.remainder(2) == 1).all().item<bool>());
  for (int64_t b = 0; b < 8; ++b) EXPECT_EQ(std::get<0>(at::_unique(d.dst[b])).numel(), 4);
}

TEST(TomePolicy, SameSeedSameDrawsAndGreedyIgnoresTheSeed) {
  torch::manual_seed(12);
  auto tokens = torch::randn({4, 10, 4});
  auto warm = make_policy("tome", Params({{"temperature", 0.3}}));
  auto a = warm->choose_merges(merge_context(tokens, 4, 11)), b = warm->choose_merges(merge_context(tokens, 4, 11));
  auto c = warm->choose_merges(merge_context(tokens, 4, 12));
  EXPECT_TRUE(torch::equal(a.src, b.src) && torch::equal(a.dst, b.dst));
  EXPECT_FALSE(torch::equal(a.src, c.src) && torch::equal(a.dst, c.dst));
  auto greedy = make_policy("tome");
  auto g = greedy->choose_merges(merge_context(tokens, 4, 11)), h = greedy->choose_merges(merge_context(tokens, 4, 12));
  EXPECT_TRUE(torch::equal(g.src, h.src) && torch::equal(g.dst, h.dst));
}

TEST(TomePolicy, RefusesBadParameters) {
  EXPECT_THAT(build_error("tome", Params({{"similarity", std::string("values")}})),
              ::testing::AllOf(::testing::HasSubstr("\"tokens\""), ::testing::HasSubstr("\"keys\""),
                               ::testing::HasSubstr("values")));
  EXPECT_THAT(build_error("tome", Params({{"temperature", -0.5}})), ::testing::HasSubstr("temperature"));
}

// htm::greedy_disjoint_pairs (SDK 6.1), nearest's merges: under the gpu kernels found in rounds on
// the logits' device, the pairs the host scan (htm::greedy_pairs) takes, in its order, wherever
// every logit is finite: integer logits (many ties), symmetric ones (distances) or not, r from 0
// to T/2; under the others, the scan itself.
TEST(GreedyDisjointPairs, TheDeviceRoundsTakeTheHostScansPairsInItsOrder) {
  for (int64_t T : {2, 3, 5, 16, 33})
    for (int64_t seed = 0; seed < 6; ++seed) {
      torch::manual_seed(seed);
      auto logits = (torch::randn({4, T, T}) * 2).round();
      if (seed % 2) logits = logits + logits.transpose(1, 2);
      for (int64_t r : {int64_t{0}, int64_t{1}, T / 2}) {
        const auto [scan_src, scan_dst] = htm::greedy_pairs(logits, r);
        for (Kernels set : {Kernels::gpu, Kernels::portable}) {
          KernelsScope scope(set);
          const auto [src, dst] = htm::greedy_disjoint_pairs(logits, r);
          ASSERT_TRUE(torch::equal(src, scan_src) && torch::equal(dst, scan_dst))
              << "T " << T << " seed " << seed << " r " << r << (set == Kernels::gpu ? " gpu" : " portable");
        }
      }
    }
  // A block of the pairs: ToMe's even rows into odd columns (a strided view on the device), and
  // rows and columns in no steps (the host scan itself).
  for (const auto& [rows, cols] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{0, 2, 4, 6, 8}, {1, 3, 5, 7}}, {{0, 3, 4}, {1, 2, 6, 7}}})
    for (int64_t seed = 0; seed < 4; ++seed) {
      torch::manual_seed(seed);
      const int64_t R = static_cast<int64_t>(rows.size()), C = static_cast<int64_t>(cols.size());
      const auto scores = (torch::randn({3, R, C}) * 2).round();
      for (int64_t r = 0; r <= 3; ++r) {
        const auto [scan_src, scan_dst] = htm::greedy_pairs(scores, r, rows, cols, 9);
        KernelsScope scope(Kernels::gpu);
        const auto [src, dst] = htm::greedy_disjoint_pairs(scores, r, rows, cols, 9);
        ASSERT_TRUE(torch::equal(src, scan_src) && torch::equal(dst, scan_dst)) << "seed " << seed << " r " << r;
      }
    }
  EXPECT_NE(htm::testing::error_of([] {
              htm::greedy_disjoint_pairs(torch::zeros({2, 3, 4}), 1);
            }).find("greedy_disjoint_pairs: logits must be B×T×T"),
            std::string::npos);
}

// bilinear: logits x_iᵀ W x_j with W the symmetric part of the layer's matrix, on detached
// tokens; with levels = 2, layer 1 reads `weight` and every deeper layer `weight_2`, and a
// layer's score function reaches its own matrix alone.
TEST(BilinearPolicy, LogitsAreTheLayersSymmetricFormAndItsGradientStaysThere) {
  auto policy = make_policy("bilinear", Params({{"levels", int64_t{2}}, {"init_std", 0.5}}));
  std::map<std::string, torch::Tensor> w;
  for (const auto& p : policy->named_parameters()) w[p.key()] = p.value();
  ASSERT_TRUE(w.count("weight") && w.count("weight_2") && !w.count("weight_3"));
  torch::manual_seed(3);
  const auto x = torch::randn({2, 6, 8}, torch::TensorOptions().requires_grad(true));
  for (int64_t depth : {1, 2, 3}) {
    auto ctx = merge_context(x, 2);
    ctx.depth = depth;
    const auto& a = w[depth == 1 ? "weight" : "weight_2"];
    const auto logits = policy->merge_logits(ctx);
    const auto expected = x.detach().matmul(0.5 * (a + a.t())).matmul(x.detach().transpose(1, 2));
    EXPECT_TRUE(torch::allclose(logits, expected, 1e-5, 1e-6)) << "depth " << depth;
    EXPECT_TRUE(torch::allclose(logits, logits.transpose(1, 2), 1e-5, 1e-6));
    for (auto& p : policy->parameters()) p.mutable_grad() = torch::Tensor();
    policy->choose_merges(ctx).log_prob.sum().backward();
    EXPECT_TRUE(w["weight"].grad().defined() == (depth == 1)) << "depth " << depth;
    EXPECT_TRUE(w["weight_2"].grad().defined() == (depth > 1)) << "depth " << depth;
    EXPECT_FALSE(x.grad().defined());  // detached: the tokens learn nothing through the score
  }
  EXPECT_NE(
      build_error("bilinear", Params({{"levels", int64_t{0}}})).find("bilinear: levels must be at least 1, got 0"),
      std::string::npos);
  // A weight a level past the model's layers would never be read: refused (99999999999 of them
  // were built one by one before, for minutes), as is an infinite init_std (NaN logits).
  EXPECT_NO_THROW(make_policy("bilinear", Params({{"levels", int64_t{3}}}), 3));
  EXPECT_THAT(build_error("bilinear", Params({{"levels", int64_t{99999999999}}}), 3),
              ::testing::HasSubstr("levels is 99999999999, more than the model's 3 merging layers (model.layers)"));
  EXPECT_THAT(build_error("bilinear", Params({{"init_std", std::numeric_limits<double>::infinity()}})),
              ::testing::HasSubstr("init_std must be a finite number, 0 or more, got inf"));
}

}  // namespace
}  // namespace htm
