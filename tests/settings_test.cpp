// The host settings' schema and the typed structs it fills.
#include <gtest/gtest.h>

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

TEST(HostSchemaTest, DefaultsReachTheTypedSettings) {
  const HostSettings s = default_settings();
  EXPECT_EQ(s.model.dim, 256);
  EXPECT_EQ(s.model.task, Task::reconstruct);
  EXPECT_EQ(s.train.lr, 1e-4);
  EXPECT_EQ(s.train.lr_schedule, LrDecay::step);
  EXPECT_EQ(s.train.checkpoint, true);
  EXPECT_EQ(s.estimator.method, EstimatorMethod::score_function);
  // Issue 12: the unbiased estimator is the default; the paper's is spelled out where wanted.
  EXPECT_EQ(s.estimator.log_prob, LogProbForm::exact);
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
