// What names a run: a file must set something, the experiment's name is one safe folder,
// and the config hash covers what changes the result and nothing else.
#include <filesystem>
#include <fstream>

#include "commands/selection.h"
#include "config/experiment_config.h"
#include "registry.h"
#include "test_util.h"

namespace htm {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

class ExperimentIdentity : public ::testing::Test {
 protected:
  ResolvedConfig resolve(const std::string& text, const std::vector<std::string>& overrides = {}) {
    std::ofstream(exp()) << text;
    return ExperimentFile::load(exp(), overrides).resolve("default", registry_);
  }
  std::string resolve_error(const std::string& text, const std::vector<std::string>& overrides = {}) {
    return htm::testing::error_of([&] { resolve(text, overrides); });
  }
  std::string exp() const { return dir_ + "/exp.toml"; }

  std::string dir_ = htm::testing::fresh_dir("identity");
  Registry registry_{{HTM_PLUGIN_DIR}};
};

TEST_F(ExperimentIdentity, AFileThatSetsNothingIsRefused) {
  for (const char* text : {"", "# only a comment\n\n   \n"})
    EXPECT_EQ(resolve_error(text), exp() +
                                       ": the file sets nothing (it is empty or holds only comments); an "
                                       "experiment file names at least its [experiment] or a plugin");
  EXPECT_NO_THROW(resolve("", {"train.epochs=1"}));  // what --set names is something
}

TEST_F(ExperimentIdentity, ExperimentNamesStayOneFolder) {
  for (const char* name : {"../../x", "a/b", ".hidden", "x y"}) {
    const std::string message = resolve_error(std::string("[experiment]\nname = \"") + name + "\"\n");
    EXPECT_TRUE(starts_with(message, exp() + ":2:")) << name << ": " << message;
    EXPECT_NE(message.find("must be one folder name"), std::string::npos) << message;
  }
  EXPECT_NO_THROW(resolve("[experiment]\nname = \"paper-policy_v2.1\"\n"));
}

TEST_F(ExperimentIdentity, TheHashIgnoresWhatDoesNotChangeTheResult) {
  const ResolvedConfig base = resolve("[train]\nlr = 0.001\n");
  for (const char* text : {"[train]\nlr = 0.001\n[runtime]\nthreads = 1\ncheckpoint_every = 5\n",
                           "[train]\nlr = 0.001\n[runtime]\nprecision = \"fp32\"\n",
                           // settings added after runs were recorded, at their defaults
                           "[train]\nlr = 0.001\n[estimator]\ndense = 0.0\nreplay = 0\nreplay_clip = 2.0\n",
                           "[train]\nlr = 0.001\n[experiment]\nseeds = [4, 5]\ndescription = \"x\"\n"})
    EXPECT_EQ(resolve(text).hash, base.hash) << text;
  EXPECT_NE(resolve("[train]\nlr = 0.001\n[model]\nschedule = [2]\n").hash, base.hash);
  // bf16 changes what a run computes: another run, whatever the thread count.
  const ResolvedConfig bf16 = resolve("[train]\nlr = 0.001\n[runtime]\nprecision = \"bf16\"\n");
  EXPECT_NE(bf16.hash, base.hash);
  EXPECT_EQ(resolve("[train]\nlr = 0.001\n[runtime]\nprecision = \"bf16\"\nthreads = 2\n").hash, bf16.hash);
  // Away from its default such a setting is part of the run's identity.
  EXPECT_NE(resolve("[train]\nlr = 0.001\n[estimator]\ndense = 0.5\n").hash, base.hash);
  EXPECT_NE(resolve("[train]\nlr = 0.001\n[estimator]\nreplay = 8\nreplay_capacity = 8\n").hash,
            resolve("[train]\nlr = 0.001\n[estimator]\nreplay = 8\n").hash);
  const std::string message = resolve_error("[runtime]\nprecision = \"fp16\"\n");
  EXPECT_TRUE(starts_with(message, exp() + ":2:")) << message;
  EXPECT_NE(message.find("fp32"), std::string::npos) << message;
}

// Which seeds confirm is part of a study's runs: set away from 1000-1009 it moves the hash (so that
// htm compare warns when the phases' files differ there); at the default, and the experiment's
// name, seeds and description, it leaves the hash where it was.
TEST_F(ExperimentIdentity, ConfirmationSeedsOtherThanTheDefaultEnterTheHash) {
  const ResolvedConfig base = resolve("[train]\nlr = 0.001\n");
  EXPECT_EQ(resolve("[train]\nlr = 0.001\n[experiment]\nconfirm_seeds = [1000, 1001, 1002, 1003, 1004, 1005, "
                    "1006, 1007, 1008, 1009]\nname = \"other\"\n")
                .hash,
            base.hash);
  const ResolvedConfig fresh = resolve("[train]\nlr = 0.001\n[experiment]\nconfirm_seeds = [2000, 2001]\n");
  EXPECT_NE(fresh.hash, base.hash);
  EXPECT_NE(resolve("[train]\nlr = 0.001\n[experiment]\nconfirm_seeds = [2000, 2002]\n").hash, fresh.hash);
  EXPECT_EQ(resolve("[train]\nlr = 0.001\n[experiment]\nconfirm_seeds = [2000, 2001]\nseeds = [7]\n").hash, fresh.hash);
}

// Settings added after runs were recorded (runtime.precision, estimator.dense, estimator.replay*)
// leave the hash of a config that does not use them where it was: this is the hash the
// default experiment had before they existed (htm 8c927e1). A change to a default plugin's
// parameters moves it too, and should be as deliberate.
TEST_F(ExperimentIdentity, RunsRecordedBeforeASettingExistedKeepTheirHash) {
  EXPECT_EQ(resolve("[train]\nlr = 0.001\n").hash, "6a0edda1137b49ba");
}

TEST_F(ExperimentIdentity, SweepsAddGridAxesCrossedWithTheFilesVariants) {
  std::ofstream(exp()) << "[experiment]\nname = \"sweep\"\n[variants.wide]\n[variants.narrow]\nmodel.dim = 32\n";
  ExperimentFile file = ExperimentFile::load(exp());
  file.add_sweep("train.lr=1e-3,3e-3");
  file.add_sweep("policy.plugin=learned,random");  // bare words: strings
  const std::vector<std::string> expected = {
      "wide/train.lr=0.001,policy.plugin=learned",   "wide/train.lr=0.001,policy.plugin=random",
      "wide/train.lr=0.003,policy.plugin=learned",   "wide/train.lr=0.003,policy.plugin=random",
      "narrow/train.lr=0.001,policy.plugin=learned", "narrow/train.lr=0.001,policy.plugin=random",
      "narrow/train.lr=0.003,policy.plugin=learned", "narrow/train.lr=0.003,policy.plugin=random"};
  EXPECT_EQ(file.variants(), expected);
  const ResolvedConfig config = file.resolve("narrow/train.lr=0.003,policy.plugin=random", registry_);
  EXPECT_EQ(config.settings.train.lr, 3e-3);
  EXPECT_EQ(config.settings.model.dim, 32);
  EXPECT_EQ(config.policy.name, "random");
  EXPECT_EQ(htm::testing::error_of([&] { file.add_sweep("nonsense"); }),
            "--sweep nonsense: expected KEY=A,B,..., like train.lr=1e-3,3e-3");
  file.add_sweep("train.lrr=1,2");  // a key is checked where settings are: at resolution
  EXPECT_THAT(htm::testing::error_of([&] { file.resolve(file.variants().front(), registry_); }),
              ::testing::HasSubstr("--sweep train.lrr=1,2: unknown key 'train.lrr'"));
}

// --jobs N > 1 starts the longest runs first: the Trees study's width-64 variants, then its
// width-16 RLOO recipe (3072 small steps), then nearest (1024 small steps, no policy to train).
TEST_F(ExperimentIdentity, AStudyUnderSeveralJobsStartsItsLongestRunsFirst) {
  ExperimentFile file = ExperimentFile::load(std::string(HTM_SOURCE_DIR) + "/experiments/htm/trees.toml");
  std::vector<PlannedRun> plan;
  for (const auto& variant : file.variants()) {
    auto config = std::make_shared<const ResolvedConfig>(file.resolve(variant, registry_));
    for (int64_t seed : {0, 1}) plan.push_back({variant, seed, config});
  }
  std::vector<std::string> order;
  for (const auto& run : longest_first(plan)) order.push_back(run.variant + std::to_string(run.seed));
  EXPECT_EQ(order, (std::vector<std::string>{"learned0", "learned1", "random0", "random1", "rloo_long0", "rloo_long1",
                                             "nearest0", "nearest1"}));
  // More epochs or a wider model cost more; the same config, in the plan's order.
  EXPECT_GT(planned_cost(resolve("[train]\nepochs = 4\n")), planned_cost(resolve("[train]\nepochs = 2\n")));
  EXPECT_GT(planned_cost(resolve("[model]\ndim = 64\n")), planned_cost(resolve("[model]\ndim = 32\n")));
  std::vector<PlannedRun> same;
  auto config = std::make_shared<const ResolvedConfig>(resolve("[train]\nepochs = 1\n"));
  for (int64_t seed : {3, 1, 2}) same.push_back({"default", seed, config});
  std::vector<int64_t> seeds;
  for (const auto& run : longest_first(same)) seeds.push_back(run.seed);
  EXPECT_EQ(seeds, (std::vector<int64_t>{3, 1, 2}));
}

}  // namespace
}  // namespace htm
