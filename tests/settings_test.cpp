// The host settings' schema and the typed structs it fills.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config/settings.h"
#include "test_util.h"

namespace htm {
namespace {

using htm::testing::error_of;
using Ints = std::vector<int64_t>;

TEST(HostSchemaTest, DefaultsHoldTheirTypes) {
  for (const HostSection& section : host_schema()) {
    for (const HostSetting& setting : section.settings) {
      const ParamSpec& spec = setting.spec;
      EXPECT_EQ(type_of(spec.default_value), spec.type) << section.name << "." << spec.name;
      EXPECT_FALSE(spec.description.empty()) << section.name << "." << spec.name;
      if (!setting.choices.empty()) EXPECT_EQ(Value(setting.choices.front()), spec.default_value) << spec.name;
    }
  }
}

// docs/experiments.md shows the schema's own text: under each section's heading, one table row
// per setting, "| `name` | type | `default` | description |", the description word for word.
TEST(HostSchemaTest, TheExperimentsGuideShowsEverySettingWithItsSchemaText) {
  std::ifstream in(std::string(HTM_SOURCE_DIR) + "/docs/experiments.md");
  ASSERT_TRUE(in) << "docs/experiments.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const HostSection& section : host_schema()) {
    const size_t begin = doc.find("### `[" + section.name + "]`");
    ASSERT_NE(begin, std::string::npos) << "no heading for [" << section.name << "]";
    const size_t end = doc.find("\n#", begin + 1);
    const std::string part = doc.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    for (const HostSetting& setting : section.settings) {
      const std::string what = section.name + "." + setting.spec.name;
      const size_t row = part.find("\n| `" + setting.spec.name + "` | ");
      ASSERT_NE(row, std::string::npos) << what << " has no row under [" << section.name << "]";
      const std::string line = part.substr(row + 1, part.find('\n', row + 1) - row - 1);
      EXPECT_NE(line.find("| " + setting.spec.description + " |"), std::string::npos)
          << what << ": the row's meaning is not the schema's description\n  row:    " << line
          << "\n  schema: " << setting.spec.description;
    }
  }
}

TEST(HostSchemaTest, DefaultsReachTheTypedSettings) {
  const HostSettings s = default_settings();
  EXPECT_EQ(s.model.dim, 256);
  EXPECT_EQ(s.model.task, Task::reconstruct);
  EXPECT_EQ(s.train.lr, 1e-4);
  EXPECT_EQ(s.train.lr_schedule, LrDecay::step);
  EXPECT_EQ(s.train.checkpoint, true);
  EXPECT_EQ(s.estimator.method, EstimatorMethod::score_function);
  // Issue 12: the unbiased estimator is the default; the paper's is spelled out where wanted.
  EXPECT_EQ(s.estimator.log_prob, EstimatorLogProb::exact);
  EXPECT_EQ(s.estimator.reward, RewardScope::sample);
  EXPECT_EQ(s.estimator.baseline, RewardBaseline::ema);
  EXPECT_EQ(s.estimator.rollouts, 1);
  EXPECT_EQ(s.runtime.results, kDefaultResultsPath);
  EXPECT_EQ(s.experiment.seeds, Ints{0});
}

TEST(HostSchemaTest, TypedSettingsNameAMissingOrMistypedKey) {
  std::map<std::string, Value> values;
  for (const HostSection& section : host_schema())
    for (const HostSetting& setting : section.settings)
      values[section.name + "." + setting.spec.name] = setting.spec.default_value;
  values["train.lr"] = int64_t{1};
  EXPECT_EQ(error_of([&] { typed_settings(values); }), "setting 'train.lr' is an int, not a float");
  values.erase("train.lr");
  EXPECT_EQ(error_of([&] { typed_settings(values); }), "the config has no setting 'train.lr'");
}

}  // namespace
}  // namespace htm
