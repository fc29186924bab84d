// Parameter values: their type names, TOML spelling and typed access.
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <cfloat>

#include "htm/manifest.h"
#include "htm/value.h"
#include "test_util.h"

namespace htm {
namespace {

using htm::testing::error_of;
using Ints = std::vector<int64_t>;

TEST(ValueTest, NamesTypesAndKinds) {
  EXPECT_STREQ(type_name(ValueType::float_list), "float list");
  EXPECT_STREQ(type_name(ValueType::integer), "int");
  EXPECT_EQ(type_of(Value(int64_t{3})), ValueType::integer);
  EXPECT_EQ(type_of(Value(std::vector<std::string>{})), ValueType::string_list);
  for (PluginKind kind :
       {PluginKind::policy, PluginKind::merge, PluginKind::loss, PluginKind::adapter, PluginKind::dataset}) {
    PluginKind parsed = PluginKind::dataset == kind ? PluginKind::policy : PluginKind::dataset;
    EXPECT_TRUE(parse_kind(kind_name(kind), &parsed));
    EXPECT_EQ(parsed, kind);
  }
  PluginKind untouched = PluginKind::merge;
  EXPECT_FALSE(parse_kind("polcy", &untouched));
  EXPECT_EQ(untouched, PluginKind::merge);
}

TEST(ValueTest, TomlSpelling) {
  EXPECT_EQ(to_toml(1.0), "1.0");
  EXPECT_EQ(to_toml(1e-4), "0.0001");
  EXPECT_EQ(to_toml(0.1), "0.1");
  EXPECT_EQ(to_toml(1e20), "1e+20");
  EXPECT_EQ(to_toml(int64_t{-3}), "-3");
  EXPECT_EQ(to_toml(true), "true");
  EXPECT_EQ(to_toml(std::string("a\"b\\c\n")), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(to_toml(Ints{128, 64}), "[128, 64]");
  EXPECT_EQ(to_toml(std::vector<double>{0.5, 2}), "[0.5, 2.0]");
  EXPECT_EQ(to_toml(std::vector<std::string>{"a", "b"}), "[\"a\", \"b\"]");
  EXPECT_EQ(to_toml(Ints{}), "[]");
}

TEST(ValueTest, FloatsReadBackExactlyAsFloats) {
  for (double x : {1.0 / 3, 2e-300, 123456789.123, 5e-324, DBL_MAX, -0.0, 1e16, 0.3, 100.0}) {
    toml::table parsed = toml::parse("v = " + to_toml(x));
    ASSERT_TRUE(parsed["v"].is_floating_point()) << to_toml(x);
    EXPECT_EQ(parsed["v"].value<double>().value(), x) << to_toml(x);
  }
}

TEST(ValueTest, ParamsCheckTypes) {
  const Params params({{"heads", int64_t{8}}, {"name", std::string("x")}, {"sizes", Ints{1, 2}}});
  EXPECT_EQ(params.integer("heads"), 8);
  EXPECT_EQ(params.number("heads"), 8.0);
  EXPECT_EQ(params.numbers("sizes"), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(params.text("name"), "x");
  EXPECT_EQ(error_of([&] { params.integer("name"); }), "parameter 'name' is a string, expected an int");
  EXPECT_EQ(error_of([&] { params.flag("heads"); }), "parameter 'heads' is an int, expected a bool");
  EXPECT_EQ(error_of([&] { params.texts("sizes"); }), "parameter 'sizes' is an int list, expected a string list");
  EXPECT_EQ(error_of([&] { params.at("depth"); }), "parameter 'depth' is missing");
}

// An integer whose 0 means a default (a policy's heads, a scoring width): 0 gives the default, a
// negative value is refused (it used to fall silently to the default).
TEST(ValueTest, IntegerOrGivesTheDefaultForZeroAndRefusesANegative) {
  const Params params({{"heads", int64_t{8}}, {"width", int64_t{0}}, {"bad", int64_t{-1}}});
  EXPECT_EQ(params.integer_or("heads", 2), 8);
  EXPECT_EQ(params.integer_or("width", 16), 16);
  EXPECT_EQ(error_of([&] { params.integer_or("bad", 16); }), "bad must be 0 (its default) or more, got -1");
}

}  // namespace
}  // namespace htm
