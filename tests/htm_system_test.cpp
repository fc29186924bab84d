// The HTM system on data with a known hierarchy: merges replayed as trees, the leaf/internal
// classifier, generation, and a whole run on Trees data scored against the truth.
#include <filesystem>
#include <fstream>

#include <torch/torch.h>

#include "commands/commands.h"
#include "commands/runner.h"
#include "commands/sample.h"
#include "hierarchy/tree_scoring.h"
#include "model/model.h"
#include "plugins_util.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"

namespace htm {
namespace {

// Two layers of merges on 6 tokens, replayed by hand:
// layer 1 merges token 4 into 1 and 0 into 5: population [1+4, 2, 3, 0+5] = nodes [6, 2, 3, 7];
// layer 2 merges position 2 (node 3) into position 0 (node 6): node 8 = {6, 3}.
TEST(MergeTrees, ReplayTheModelsRenumbering) {
  MergeDecision first{torch::tensor({{4, 0}}), torch::tensor({{1, 5}}), {}};
  MergeDecision second{torch::tensor({{2}}), torch::tensor({{0}}), {}};
  const auto trees = merge_trees({first, second}, 6);
  ASSERT_EQ(trees.size(), 1u);
  const MergeTree& t = trees[0];
  EXPECT_EQ(t.leaves, 6);
  ASSERT_EQ(t.merges.size(), 3u);
  EXPECT_EQ(t.merges[0], (std::array<int64_t, 2>{4, 1}));
  EXPECT_EQ(t.merges[1], (std::array<int64_t, 2>{0, 5}));
  EXPECT_EQ(t.merges[2], (std::array<int64_t, 2>{3, 6}));
  EXPECT_EQ(t.layer, (std::vector<int64_t>{1, 1, 2}));
}

TEST(MergeTrees, ShapeCodesIgnoreLabelsButNotShape) {
  const MergeTree balanced = tree_from_merges(4, {{0, 1}, {2, 3}, {4, 5}});
  const MergeTree relabelled = tree_from_merges(4, {{3, 1}, {0, 2}, {5, 4}});
  const MergeTree chain = tree_from_merges(4, {{0, 1}, {4, 2}, {5, 3}});
  EXPECT_EQ(shape_code(balanced), "((()())(()()))");
  EXPECT_EQ(shape_code(relabelled), shape_code(balanced));
  EXPECT_EQ(shape_code(chain), "(((()())())())");
  EXPECT_EQ(shape_code(tree_from_merges(3, {{0, 2}})), "(()())()");  // a forest, sorted
}

// The replay agrees with the model: merging the tokens of a real forward pass and recomputing
// the clusters from the replayed tree gives each final token's leaves.
TEST(MergeTrees, AgreeWithARealForwardPass) {
  BuildContext ctx;
  ctx.dim = 16;
  ctx.heads = 2;
  ctx.mlp_ratio = 2;
  ctx.dropout = 0;
  ctx.sample_shape = {8, 2};
  torch::manual_seed(0);
  auto adapter = htm::testing::plugins().create<Adapter>(
      PluginKind::adapter, "points", htm::testing::plugins().default_params(PluginKind::adapter, "points"), ctx);
  auto policy = htm::testing::plugins().create<Policy>(
      PluginKind::policy, "learned", htm::testing::plugins().default_params(PluginKind::policy, "learned"), ctx);
  auto merge = htm::testing::plugins().create<MergeOperator>(
      PluginKind::merge, "mlp", htm::testing::plugins().default_params(PluginKind::merge, "mlp"), ctx);
  ModelOptions options;
  options.dim = 16;
  options.heads = 2;
  options.mlp_ratio = 2;
  options.dropout = 0;
  options.leaf_classifier = LeafClassifier::trained;
  auto model = std::make_shared<HtmModelImpl>(options, adapter, policy, merge);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto input = torch::rand({5, 8, 2}) * 2 - 1;
  auto out = model->forward(input, {4, 2, 1}, gen);
  const auto trees = merge_trees(out.merges, 8);
  ASSERT_EQ(trees.size(), 5u);
  for (const auto& t : trees) {
    ASSERT_EQ(t.merges.size(), 7u);  // a full tree: 8 leaves, 7 merges
    std::vector<int> used(15, 0);
    for (const auto& m : t.merges) ++used[m[0]], ++used[m[1]];
    for (int node = 0; node < 14; ++node) EXPECT_EQ(used[node], 1) << "node " << node;
    EXPECT_EQ(used[14], 0);
  }

  // The classifier is a probe: its loss trains its head and nothing upstream.
  ASSERT_TRUE(out.leaf_loss.defined());
  ASSERT_EQ(out.leaf_loss.sizes(), (std::vector<int64_t>{5}));
  EXPECT_FALSE(out.leaf_accuracy.defined());  // measured in eval mode only
  out.leaf_loss.sum().backward();
  for (const auto& p : model->named_parameters()) {
    const bool head = p.key().rfind("leaf_head.", 0) == 0;
    const bool reached = p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0;
    EXPECT_EQ(reached, head) << p.key();
  }
  {  // Its labels, counted by hand for 8 leaves and the schedule {4, 2, 1}: the encoder's
    // populations hold 8 leaves, then 4 + 2 + 1 internal tokens; the decoder splits 1 + 2 + 4
    // internal tokens and ends with 8 leaves. 16 of the 30 labels are "leaf", 14 "internal", so
    // a head that always answers one class scores 16/30 or 14/30 in eval mode.
    torch::NoGradGuard no_grad;
    model->eval();
    auto params = model->named_parameters();
    auto last_weight = params["leaf_head.3.weight"], last_bias = params["leaf_head.3.bias"];
    auto saved_weight = last_weight.clone(), saved_bias = last_bias.clone();
    last_weight.zero_();
    for (const auto& [bias, expected] :
         std::vector<std::pair<std::vector<float>, double>>{{{9, 0}, 16.0 / 30}, {{0, 9}, 14.0 / 30}}) {
      last_bias.copy_(torch::tensor(bias));
      EXPECT_DOUBLE_EQ(model->forward(input, {4, 2, 1}, gen).leaf_accuracy.item<double>(), expected);
    }
    last_weight.copy_(saved_weight);
    last_bias.copy_(saved_bias);
    model->train();
  }
}

// Trains a tiny model on Trees with the classifier, scores it, and generates from it.
std::string trees_experiment(const std::string& dir) {
  const std::string path = dir + "/trees.toml";
  std::ofstream(path) << "[experiment]\nname = \"tiny-trees\"\nseeds = [0]\n"
                      << "[dataset]\nplugin = \"trees\"\ntokens = 8\ntrain_size = 256\ntest_size = 64\n"
                      << "[adapter]\nplugin = \"points\"\n"
                      << "[loss.point_set]\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 3\nmlp_ratio = 2\nleaf_classifier = true\n"
                      << "[train]\nepochs = 2\nbatch_size = 32\nlog_every = 1\nrho0 = 0.5\nrho_step = 0.5\n"
                      << "lr = 0.001\nimages = 3\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\n"
                      << "artifacts = \"" << dir << "/runs\"\n";
  return path;
}

double metric(ResultsStore& store, const std::string& name) {
  auto r = store.query("SELECT value FROM latest_metrics WHERE split = 'test' AND name = '" + name + "'");
  return r.rows.empty() ? -1 : std::stod(r.rows[0][0]);
}

TEST(HtmSystem, TreesRunIsScoredAgainstTheTruthAndGenerates) {
  const std::string dir = htm::testing::fresh_dir("trees");
  RunRequest request;
  request.file = trees_experiment(dir);
  ASSERT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  ResultsStore store(dir + "/htm.sqlite");
  // 8 leaves merged [4, 2, 1] can build the balanced truth exactly.
  EXPECT_EQ(metric(store, "truth_reachable"), 1.0);
  for (const char* name : {"sibling_precision", "sibling_recall", "sibling_f1", "cluster_f1", "random/sibling_f1",
                           "random/cluster_f1", "agglomerative/cluster_f1", "leaf_accuracy"}) {
    const double v = metric(store, name);
    EXPECT_GE(v, 0) << name;
    EXPECT_LE(v, 1) << name;
  }
  // Layered agglomerative clustering recovers these well-separated trees; random does not.
  EXPECT_GT(metric(store, "agglomerative/cluster_f1"), 0.9);
  EXPECT_LT(metric(store, "random/sibling_f1"), 0.4);
  EXPECT_GT(metric(store, "mse"), 0);
  for (const char* kind : {"policy", "reconstructions", "checkpoint"}) {
    auto r = store.query(std::string("SELECT path FROM artifacts WHERE kind = '") + kind + "'");
    ASSERT_FALSE(r.rows.empty()) << kind;
    EXPECT_TRUE(std::filesystem::exists(r.rows[0][0])) << r.rows[0][0];
  }

  // htm sample: a mixture on the roots, decoded by the classifier, drawn as a grid.
  const std::string png = dir + "/samples.png";
  EXPECT_EQ(cmd_sample({"1", "-n", "6", "--components", "2", "--fit-samples", "128", "--out", png, "--db",
                        dir + "/htm.sqlite"}),
            0);
  EXPECT_TRUE(std::filesystem::exists(png));
  EXPECT_EQ(store.query("SELECT count(*) FROM artifacts WHERE kind = 'samples'").rows[0][0], "1");
  EXPECT_THROW(cmd_sample({"99", "--db", dir + "/htm.sqlite"}), Error);
}

}  // namespace
}  // namespace htm
