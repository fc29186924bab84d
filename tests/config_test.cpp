// Experiment files: values, extends, variants, grid, --set, every error message and the resolved document.
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cfloat>
#include <filesystem>
#include <fstream>
#include <functional>
#include <list>

#include "config/device.h"
#include "config/experiment_config.h"
#include "htm/error.h"
#include "test_util.h"

namespace htm {
namespace {

namespace fs = std::filesystem;
using Ints = std::vector<int64_t>;

ParamSpec spec(const std::string& name, ValueType type, Value value) { return {name, type, std::move(value), ""}; }

class FakeCatalog : public PluginCatalog {
 public:
  FakeCatalog() {
    add(PluginKind::policy, "learned",
        {spec("heads", ValueType::integer, int64_t{4}), spec("hidden", ValueType::integer_list, Ints{128})});
    add(PluginKind::policy, "heuristic", {});
    add(PluginKind::policy, "random", {spec("temperature", ValueType::floating, 1.0)});
    add(PluginKind::merge, "mlp", {spec("expansion", ValueType::integer, int64_t{4})});
    add(PluginKind::merge, "moe", {spec("experts", ValueType::integer, int64_t{4})});
    add(PluginKind::loss, "mse", {});
    add(PluginKind::loss, "sinkhorn",
        {spec("epsilon", ValueType::floating, 0.1), spec("iterations", ValueType::integer, int64_t{50})});
    add(PluginKind::adapter, "image", {spec("patch", ValueType::integer, int64_t{2})});
    add(PluginKind::dataset, "fashion_mnist", {spec("root", ValueType::string, std::string("/data"))});
    add(PluginKind::dataset, "crosses", {spec("tokens", ValueType::integer, int64_t{16})});
  }

  const Manifest* find(PluginKind kind, const std::string& name) const override {
    for (const Manifest& manifest : manifests_) {
      if (manifest.kind == kind && manifest.name == name) return &manifest;
    }
    return nullptr;
  }

  std::vector<std::string> names(PluginKind kind) const override {
    std::vector<std::string> names;
    for (const Manifest& manifest : manifests_) {
      if (manifest.kind == kind) names.push_back(manifest.name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  void remove(PluginKind kind, const std::string& name) {
    manifests_.remove_if([&](const Manifest& m) { return m.kind == kind && m.name == name; });
  }

 private:
  void add(PluginKind kind, const std::string& name, std::vector<ParamSpec> params) {
    manifests_.push_back({name, kind, "1", kSdkAbiVersion, name + " for tests", std::move(params)});
  }

  std::list<Manifest> manifests_;  // a list, so find()'s pointers survive remove()
};

using htm::testing::error_of;

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Reference FNV-1a 64, checked against the published test vector below.
std::string fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / "htm_config_test" /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    htm::testing::remove_tree(dir_);
    fs::create_directories(dir_);
  }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = (dir_ / name).lexically_normal();
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
    return path.string();
  }

  ResolvedConfig resolve(const std::string& text, const std::vector<std::string>& overrides = {},
                         const std::string& variant = "default") {
    return ExperimentFile::load(write("exp.toml", text), overrides).resolve(variant, catalog_);
  }

  std::string resolve_error(const std::string& text, const std::vector<std::string>& overrides = {},
                            const std::string& variant = "default") {
    return error_of([&] { resolve(text, overrides, variant); });
  }

  std::string exp() const { return (dir_ / "exp.toml").lexically_normal().string(); }

  fs::path dir_;
  FakeCatalog catalog_;
};

TEST_F(ConfigTest, EmptyFileGetsEveryDefault) {
  const ResolvedConfig config = resolve("[experiment]\n");
  const std::map<std::string, Value> flat = config.flattened();
  for (const HostSection& section : host_schema()) {
    for (const HostSetting& setting : section.settings) {
      const std::string key = section.name + "." + setting.spec.name;
      if (key != "experiment.name") EXPECT_EQ(flat.at(key), setting.spec.default_value) << key;
    }
  }
  EXPECT_EQ(config.settings.model.dim, 256);
  EXPECT_EQ(config.settings.train.lr, 1e-4);
  EXPECT_EQ(config.settings.estimator.method, EstimatorMethod::score_function);
  EXPECT_EQ(config.settings.experiment.name, "exp");
  EXPECT_EQ(flat.at("experiment.name"), Value(std::string("exp")));
  EXPECT_EQ(config.experiment, "exp");
  EXPECT_EQ(config.variant, "default");
  EXPECT_EQ(config.dataset.name, "fashion_mnist");
  EXPECT_EQ(config.dataset.params.text("root"), "/data");
  EXPECT_EQ(config.adapter.name, "image");
  EXPECT_EQ(config.policy.name, "learned");
  EXPECT_EQ(config.policy.params.integer("heads"), 4);
  EXPECT_EQ(config.policy.params.integers("hidden"), Ints{128});
  EXPECT_EQ(config.merge.name, "mlp");
  ASSERT_EQ(config.losses.size(), 1u);
  EXPECT_EQ(config.losses.at("mse").params.values(), (std::map<std::string, Value>{{"weight", 1.0}}));
}

TEST_F(ConfigTest, FileValuesReplaceDefaultsAndIntegersWiden) {
  const ResolvedConfig config = resolve(R"([experiment]
name = "ablation"
[model]
dim = 64
[train]
lr = 1
lr_decay_epochs = [3, 6]
[policy]
plugin = "random"
temperature = 2
[loss.sinkhorn]
epsilon = 1
weight = 0.5
)");
  EXPECT_EQ(config.experiment, "ablation");
  EXPECT_EQ(config.settings.model.dim, 64);
  EXPECT_EQ(config.settings.model.heads, 8);
  EXPECT_EQ(config.flattened().at("train.lr"), Value(1.0));
  EXPECT_EQ(config.settings.train.lr, 1.0);
  EXPECT_EQ(config.settings.train.lr_decay_epochs, (Ints{3, 6}));
  EXPECT_EQ(config.losses.at("sinkhorn").weight, 0.5);
  EXPECT_EQ(config.policy.name, "random");
  EXPECT_EQ(config.policy.params.values(), (std::map<std::string, Value>{{"temperature", 2.0}}));
  ASSERT_EQ(config.losses.size(), 1u);
  EXPECT_EQ(config.losses.at("sinkhorn").params.values(),
            (std::map<std::string, Value>{{"epsilon", 1.0}, {"iterations", int64_t{50}}, {"weight", 0.5}}));
}

TEST_F(ConfigTest, EmptyListFitsAnyListType) {
  EXPECT_EQ(resolve("[train]\nlr_decay_epochs = []\n").settings.train.lr_decay_epochs, Ints{});
  EXPECT_EQ(resolve("[model]\nschedule = []\n").flattened().at("model.schedule"), Value(Ints{}));
}

TEST_F(ConfigTest, ExtendsMergesTablesAndReplacesValues) {
  write("base.toml", "[model]\ndim = 64\nheads = 4\nschedule = [8, 4]\n[policy]\nheads = 2\n");
  write("more.toml", "[model]\nheads = 2\n[train]\nepochs = 3\n");
  const std::string child =
      write("sub/child.toml", "extends = [\"../base.toml\", \"../more.toml\"]\n[model]\ndim = 128\nschedule = [2]\n");
  const ResolvedConfig config = ExperimentFile::load(child).resolve("default", catalog_);
  EXPECT_EQ(config.settings.model.dim, 128);           // the child wins
  EXPECT_EQ(config.settings.model.heads, 2);           // the later base wins
  EXPECT_EQ(config.settings.model.schedule, Ints{2});  // arrays replace
  EXPECT_EQ(config.settings.train.epochs, 3);
  EXPECT_EQ(config.policy.params.integer("heads"), 2);
  EXPECT_EQ(config.experiment, "child");
}

TEST_F(ConfigTest, ExtendsCycleIsReported) {
  const std::string a = write("a.toml", "extends = \"b.toml\"\n");
  const std::string b = write("b.toml", "extends = \"a.toml\"\n");
  EXPECT_EQ(error_of([&] { ExperimentFile::load(a); }), b + ":1:11: extends cycle: " + a + " -> " + b + " -> " + a);
}

TEST_F(ConfigTest, MissingFilesAreReported) {
  const std::string path = write("exp.toml", "# base\nextends = \"nope.toml\"\n");
  EXPECT_TRUE(starts_with(error_of([&] { ExperimentFile::load(path); }),
                          path + ":2:11: cannot open extended file 'nope.toml' (looked beside " + path));
  const std::string missing = (dir_ / "absent.toml").string();
  EXPECT_EQ(error_of([&] { ExperimentFile::load(missing); }), "cannot open experiment file '" + missing + "'");
}

TEST_F(ConfigTest, ExtendsFallsBackToHtmsExperiments) {
  // A file in a user's own folder extends one of htm's experiments by its name there.
  const std::string shelf = write("shelf/paper/base.toml", "[model]\ndim = 96\n");
  const std::string mine = write("elsewhere/mine.toml", "extends = \"paper/base.toml\"\n[train]\nepochs = 4\n");
  ::setenv("HTM_EXPERIMENTS_PATH", (dir_ / "shelf").c_str(), 1);
  const ResolvedConfig config = ExperimentFile::load(mine).resolve("default", catalog_);
  EXPECT_EQ(config.settings.model.dim, 96);
  EXPECT_EQ(config.settings.train.epochs, 4);
  // A file beside the including one wins over the shelf.
  write("elsewhere/paper/base.toml", "[model]\ndim = 48\n");
  EXPECT_EQ(ExperimentFile::load(mine).resolve("default", catalog_).settings.model.dim, 48);
  // And an experiment file itself is found there by its name.
  EXPECT_EQ(ExperimentFile::load("paper/base.toml").path(), shelf);
  ::unsetenv("HTM_EXPERIMENTS_PATH");
}

TEST_F(ConfigTest, ErrorsInExtendedFilesNameThatFile) {
  const std::string base = write("base.toml", "[train]\nepochs = 2\nlrr = 0.1\n");
  EXPECT_EQ(resolve_error("extends = \"base.toml\"\n[train]\nlr = 0.1\n"),
            base +
                ":3:1: unknown key 'train.lrr'; expected one of: anytime, batch_size, checkpoint, epochs, "
                "eval_batch_size, eval_every, eval_greedy, eval_policies, eval_samples, grad_clip, images, "
                "log_every, lr, lr_decay_epochs, lr_decay_factor, lr_schedule, max_steps, rho0, rho_end, rho_ramp, "
                "rho_schedule, rho_step, stochastic_depth, train_samples, warmup_steps, weight_decay");
}

TEST_F(ConfigTest, VariantsKeepDeclarationOrder) {
  const std::string path = write("exp.toml", R"([model]
dim = 64
[variants.zeta]
model.dim = 32
[variants.alpha]
[variants.alpha.policy]
plugin = "random"
[variants.mid]
train = { epochs = 5 }
)");
  const ExperimentFile file = ExperimentFile::load(path);
  EXPECT_EQ(file.variants(), (std::vector<std::string>{"zeta", "alpha", "mid"}));
  EXPECT_EQ(file.resolve("zeta", catalog_).settings.model.dim, 32);
  const ResolvedConfig alpha = file.resolve("alpha", catalog_);
  EXPECT_EQ(alpha.variant, "alpha");
  EXPECT_EQ(alpha.settings.model.dim, 64);
  EXPECT_EQ(alpha.policy.name, "random");
  EXPECT_EQ(file.resolve("mid", catalog_).settings.train.epochs, 5);
  EXPECT_EQ(error_of([&] { file.resolve("default", catalog_); }),
            path + " has no variant 'default'; it has: zeta, alpha, mid");
}

TEST_F(ConfigTest, FileWithoutVariantsHasDefault) {
  EXPECT_EQ(ExperimentFile::load(write("exp.toml", "[model]\ndim = 8\n")).variants(),
            std::vector<std::string>{"default"});
}

TEST_F(ConfigTest, NamingAnotherPluginDropsTheOldOnesParameters) {
  const ExperimentFile file = ExperimentFile::load(write("exp.toml", R"([policy]
plugin = "learned"
heads = 2
[variants.random]
policy.plugin = "random"
[variants.wide]
policy.heads = 16
)"));
  const ResolvedConfig random = file.resolve("random", catalog_);
  EXPECT_EQ(random.policy.name, "random");
  EXPECT_EQ(random.policy.params.values(), (std::map<std::string, Value>{{"temperature", 1.0}}));
  const ResolvedConfig wide = file.resolve("wide", catalog_);
  EXPECT_EQ(wide.policy.name, "learned");
  EXPECT_EQ(wide.policy.params.integer("heads"), 16);
}

TEST_F(ConfigTest, GridExpandsEveryCombination) {
  const ExperimentFile file = ExperimentFile::load(write("exp.toml", R"([grid]
"model.merge_fraction" = [0.25, 0.5]
"policy.plugin" = ["learned", "random"]
)"));
  EXPECT_EQ(file.variants(), (std::vector<std::string>{
                                 "model.merge_fraction=0.25,policy.plugin=learned",
                                 "model.merge_fraction=0.25,policy.plugin=random",
                                 "model.merge_fraction=0.5,policy.plugin=learned",
                                 "model.merge_fraction=0.5,policy.plugin=random",
                             }));
  const ResolvedConfig config = file.resolve("model.merge_fraction=0.25,policy.plugin=random", catalog_);
  EXPECT_EQ(config.settings.model.merge_fraction, 0.25);
  EXPECT_EQ(config.policy.name, "random");
}

TEST_F(ConfigTest, GridCrossesVariants) {
  const ExperimentFile file = ExperimentFile::load(write("exp.toml", R"([variants.small]
model.dim = 32
[variants.large]
model.dim = 512
[grid]
"train.epochs" = [1, 2]
)"));
  EXPECT_EQ(file.variants(), (std::vector<std::string>{"small/train.epochs=1", "small/train.epochs=2",
                                                       "large/train.epochs=1", "large/train.epochs=2"}));
  const ResolvedConfig config = file.resolve("large/train.epochs=2", catalog_);
  EXPECT_EQ(config.settings.model.dim, 512);
  EXPECT_EQ(config.settings.train.epochs, 2);
}

TEST_F(ConfigTest, SetOverridesAreTypedOrStrings) {
  const ResolvedConfig config =
      resolve("[variants.long]\ntrain.epochs = 3\n",
              {"train.epochs=5", "train.lr = 1e-3", "model.schedule=[4, 2]", "experiment.description=plain words",
               "policy.plugin=random", "loss.sinkhorn.epsilon=2"},
              "long");
  EXPECT_EQ(config.settings.train.epochs, 5);  // after the variant
  EXPECT_EQ(config.settings.train.lr, 1e-3);
  EXPECT_EQ(config.settings.model.schedule, (Ints{4, 2}));
  EXPECT_EQ(config.settings.experiment.description, "plain words");
  EXPECT_EQ(config.policy.name, "random");
  ASSERT_EQ(config.losses.size(), 1u);
  EXPECT_EQ(config.losses.at("sinkhorn").params.number("epsilon"), 2.0);
}

TEST_F(ConfigTest, SetErrorsNameTheOverride) {
  EXPECT_EQ(resolve_error("", {"train.lr=abc"}), "--set train.lr=abc: 'train.lr' expects a float, got a string");
  EXPECT_TRUE(starts_with(resolve_error("", {"train.lrr=1"}),
                          "--set train.lrr=1: unknown key 'train.lrr'; expected one of: anytime, batch_size,"));
  EXPECT_EQ(resolve_error("", {"policy.plugin=learnd"}),
            "--set policy.plugin=learnd: unknown policy plugin 'learnd'; known: heuristic, learned, random");
  EXPECT_EQ(error_of([&] { ExperimentFile::load(write("exp.toml", ""), {"train.epochs"}); }),
            "--set train.epochs: expected KEY=VALUE, like train.epochs=2");
}

// runtime.device: a device this libtorch can use, refused at the line that asks for another.
TEST_F(ConfigTest, ADeviceThisLibtorchCannotUseIsRefusedAtItsLine) {
  EXPECT_EQ(resolve_error("[runtime]\ndevice = \"gpu\"\n"),
            exp() + ":2:10: 'runtime.device' expects \"cpu\", \"cuda\" or \"cuda:N\", got \"gpu\"");
  EXPECT_EQ(resolve_error("[runtime]\ndevice = \"cuda:x\"\n"),
            exp() + ":2:10: 'runtime.device' expects \"cpu\", \"cuda\" or \"cuda:N\", got \"cuda:x\"");
  if (cuda_usable()) {
    EXPECT_EQ(resolve_error("[runtime]\ndevice = \"cuda:999\"\n").find("'runtime.device' expects a GPU index below"),
              exp().size() + 7);
    GTEST_SKIP() << "this libtorch has CUDA: the refusal of \"cuda\" is for builds without it";
  }
  EXPECT_EQ(resolve_error("[runtime]\ndevice = \"cuda\"\n"),
            exp() +
                ":2:10: 'runtime.device' expects \"cpu\": this htm's libtorch has no CUDA or sees no GPU (a "
                "CUDA build: docs/gpu.md), got \"cuda\"");
}

// Values of the right type but outside what the setting means are refused where they are
// written, before anything runs (values that used to crash or train nothing: heads = 0 divided
// by zero, epochs = 0 recorded a "finished" run of 0 steps, lr = nan failed mid-run).
TEST_F(ConfigTest, OutOfRangeValuesAreRefusedWhereTheyAreWritten) {
  EXPECT_EQ(resolve_error("[model]\nheads = 0\n"), exp() + ":2:9: 'model.heads' expects at least 1, got 0");
  EXPECT_EQ(resolve_error("[train]\nbatch_size = 0\n"), exp() + ":2:14: 'train.batch_size' expects at least 1, got 0");
  EXPECT_EQ(resolve_error("", {"train.epochs=0"}), "--set train.epochs=0: 'train.epochs' expects at least 1, got 0");
  EXPECT_EQ(resolve_error("", {"train.epochs=-3"}), "--set train.epochs=-3: 'train.epochs' expects at least 1, got -3");
  EXPECT_EQ(resolve_error("[train]\nlr = nan\n"),
            exp() + ":2:6: 'train.lr' expects a finite number above 0.0, got nan");
  EXPECT_EQ(resolve_error("", {"train.lr=-1"}),
            "--set train.lr=-1: 'train.lr' expects a finite number above 0.0, got -1.0");
  EXPECT_EQ(resolve_error("[model]\ndropout = 2.0\n"),
            exp() + ":2:11: 'model.dropout' expects a number in [0.0, 1.0], got 2.0");
  EXPECT_EQ(resolve_error("[model]\nschedule = [4, -1]\n"),
            exp() + ":2:12: 'model.schedule' expects entries of at least 0, got [4, -1]");
  EXPECT_EQ(resolve_error("", {"train.eval_batch_size=0"}),
            "--set train.eval_batch_size=0: 'train.eval_batch_size' expects at least 1, got 0");
  EXPECT_EQ(resolve_error("", {"train.train_samples=-5"}),
            "--set train.train_samples=-5: 'train.train_samples' expects at least 0, got -5");
  EXPECT_EQ(resolve_error("", {"train.rho0=nan"}),
            "--set train.rho0=nan: 'train.rho0' expects a finite number above 0.0, got nan");
  // Settings that must agree: the heads split the width.
  EXPECT_EQ(resolve_error("[model]\ndim = 64\nheads = 3\n"),
            exp() + ":3:9: 'model.heads' (3) must divide 'model.dim' (64)");
  EXPECT_EQ(resolve_error("", {"model.dim=100"}),
            "--set model.dim=100: 'model.heads' (8) must divide 'model.dim' (100)");
  // The edges are allowed.
  EXPECT_NO_THROW(resolve("[model]\ndropout = 0.0\nmerge_fraction = 1.0\n[train]\nmax_steps = 0\n"));
}

TEST_F(ConfigTest, MalformedTomlPointsAtTheSpot) {
  const std::string message = resolve_error("[train]\nlr = = 1\n");
  EXPECT_TRUE(starts_with(message, exp() + ":2:6: ")) << message;
  EXPECT_GT(message.size(), (exp() + ":2:6: ").size());
}

TEST_F(ConfigTest, UnknownSectionListsSections) {
  EXPECT_EQ(resolve_error("[model]\ndim = 3\n\n[trian]\nepochs = 2\n"),
            exp() +
                ":4:2: unknown key 'trian'; expected one of: adapter, dataset, estimator, experiment, "
                "extends, grid, loss, merge, model, policy, runtime, train, variants");
}

TEST_F(ConfigTest, WrongTypePointsAtTheValue) {
  EXPECT_EQ(resolve_error("[train]\nepochs = 2\nlr = \"fast\"\n"),
            exp() + ":3:6: 'train.lr' expects a float, got a string");
  EXPECT_EQ(resolve_error("[model]\nschedule = [1.5]\n"),
            exp() + ":2:12: 'model.schedule' expects an int list, got a float list");
  EXPECT_EQ(resolve_error("[model]\ntransformer = \"yes\"\n"),
            exp() + ":2:15: 'model.transformer' expects a bool, got a string");
  EXPECT_EQ(resolve_error("model = 3\n"), exp() + ":1:9: 'model' expects a table, got an int");
  EXPECT_EQ(resolve_error("[policy]\nheads = \"many\"\n"), exp() + ":2:9: 'policy.heads' expects an int, got a string");
}

TEST_F(ConfigTest, BadChoiceListsAllowedValues) {
  EXPECT_EQ(resolve_error("[estimator]\nmethod = \"reinforce\"\n"),
            exp() + ":2:10: 'estimator.method' expects one of: score_function, prob_scale; got 'reinforce'");
  const EstimatorSettings estimator =
      resolve("[estimator]\nmethod = \"prob_scale\"\nbaseline = \"ema\"\nreward = \"sample\"\n").settings.estimator;
  EXPECT_EQ(estimator.method, EstimatorMethod::prob_scale);  // each word becomes its enum value
  EXPECT_EQ(estimator.baseline, RewardBaseline::ema);
  EXPECT_EQ(estimator.reward, RewardScope::sample);
}

TEST_F(ConfigTest, UnknownPluginListsKnownNames) {
  EXPECT_EQ(resolve_error("[policy]\nplugin = \"learnd\"\n"),
            exp() + ":2:10: unknown policy plugin 'learnd'; known: heuristic, learned, random");
  EXPECT_EQ(resolve_error("[loss.l1]\nweight = 2\n"), exp() + ":1:7: unknown loss plugin 'l1'; known: mse, sinkhorn");
}

TEST_F(ConfigTest, UnknownDefaultPluginPointsAtFileStart) {
  catalog_.remove(PluginKind::merge, "mlp");
  EXPECT_EQ(resolve_error("[experiment]\n"), exp() + ":1:1: unknown merge plugin 'mlp'; known: moe");
}

TEST_F(ConfigTest, UnknownPluginParameterListsParameters) {
  EXPECT_EQ(resolve_error("[policy]\nplugin = \"learned\"\nfoo = 1\n"),
            exp() + ":3:1: policy plugin 'learned' has no parameter 'foo'; it has: heads, hidden");
  EXPECT_EQ(resolve_error("[loss.mse]\nscale = 2\n"),
            exp() + ":2:1: loss plugin 'mse' has no parameter 'scale'; it has: weight");
}

TEST_F(ConfigTest, ErrorsInVariantsPointIntoTheVariant) {
  EXPECT_EQ(resolve_error("[model]\ndim = 64\n\n[variants.bad]\nmodel.dimm = 3\n", {}, "bad"),
            exp() +
                ":5:7: unknown key 'model.dimm'; expected one of: architecture, cross_attention, dim, "
                "dropout, heads, layers, leaf_classifier, merge_fraction, mlp_ratio, schedule, task, timestep_scale, "
                "transformer, unmerge, vit_dim");
  EXPECT_EQ(resolve_error("[grid]\n\"model.dim\" = [1.5]\n", {}, "model.dim=1.5"),
            exp() + ":2:15: 'model.dim' expects an int, got a float");
  EXPECT_EQ(resolve_error("[grid]\n\"model.dim\" = 4\n"),
            exp() + ":2:15: 'grid.model.dim' expects a non-empty list of values, got an int");
}

TEST_F(ConfigTest, ResolvedTomlRoundTrips) {
  const ResolvedConfig config = resolve(R"([experiment]
description = "a \"quoted\" line"
seeds = [0, 1, 2]
[model]
schedule = [64, 32, 16]
dropout = 0
[train]
lr = 3e-4
[estimator]
baseline = "ema"
[dataset]
plugin = "crosses"
tokens = 8
[policy]
plugin = "random"
temperature = 0.5
[loss.mse]
weight = 0.5
[loss.sinkhorn]
epsilon = 0.05
[variants.only]
)",
                                        {}, "only");
  EXPECT_EQ(config.toml.find("variants"), std::string::npos);
  EXPECT_NE(config.toml.find("[loss.sinkhorn]\n"), std::string::npos) << config.toml;
  EXPECT_NE(config.toml.find("[policy]\nplugin = \"random\"\ntemperature = 0.5\n"), std::string::npos) << config.toml;

  const ResolvedConfig back = ExperimentFile::load(write("resolved.toml", config.toml)).resolve("default", catalog_);
  EXPECT_EQ(back.flattened(), config.flattened());
  EXPECT_EQ(back.experiment, config.experiment);
  EXPECT_EQ(back.toml, config.toml);
  EXPECT_EQ(back.hash, config.hash);
}

TEST_F(ConfigTest, HashIsStableAndFollowsValues) {
  ASSERT_EQ(fnv1a("a"), "af63dc4c8601ec8c");
  const ResolvedConfig first = resolve("[train]\nlr = 0.001\n");
  const ResolvedConfig again = resolve("[train]\nlr = 0.001\n");
  const ResolvedConfig other = resolve("[train]\nlr = 0.002\n");
  EXPECT_EQ(first.hash.size(), 16u);
  EXPECT_EQ(first.hash, again.hash);
  EXPECT_NE(first.hash, other.hash);
}

TEST_F(ConfigTest, FlattenedIncludesPlugins) {
  const std::map<std::string, Value> flat = resolve("[loss.sinkhorn]\n").flattened();
  EXPECT_EQ(flat.at("model.dim"), Value(int64_t{256}));
  EXPECT_EQ(flat.at("dataset.plugin"), Value(std::string("fashion_mnist")));
  EXPECT_EQ(flat.at("policy.plugin"), Value(std::string("learned")));
  EXPECT_EQ(flat.at("policy.heads"), Value(int64_t{4}));
  EXPECT_EQ(flat.at("loss.sinkhorn.weight"), Value(1.0));
  EXPECT_EQ(flat.at("loss.sinkhorn.epsilon"), Value(0.1));
  EXPECT_EQ(flat.count("loss.mse.weight"), 0u);
}

}  // namespace
}  // namespace htm
