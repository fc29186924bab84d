// Docs that cannot drift: docs/results.md's table of what the trainer logs, against what a run
// with every optional signal switched on really logs.
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <torch/torch.h>

#include "commands/runner.h"
#include "plugins_util.h"
#include "registry.h"
#include "store/results_store.h"
#include "test_util.h"

namespace htm {
namespace {

struct LoggedName {
  std::string split;
  std::regex pattern;  ///< one backticked name of the table, placeholders as wildcards
  std::string text;
};

// The rows of "What the trainer logs" (| split | name, name | when | meaning |): each backticked
// name, with `<plugin>`, `<block>`, … and "…" read as any text.
std::vector<LoggedName> documented_names() {
  std::ifstream in(std::string(HTM_SOURCE_DIR) + "/docs/results.md");
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const size_t begin = doc.find("What the trainer logs:");
  EXPECT_NE(begin, std::string::npos) << "docs/results.md lost its table of logged metrics";
  std::vector<LoggedName> names;
  std::istringstream lines(doc.substr(begin, doc.find("\n#", begin) - begin));
  std::string line;
  const std::regex row(R"(^\| `([a-z]+)` \| ([^|]+) \|)"), name("`([^`]+)`");
  while (std::getline(lines, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string split = m[1], cell = m[2];
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), name); it != std::sregex_iterator(); ++it) {
      std::string literal = (*it)[1];
      std::string pattern;
      for (size_t i = 0; i < literal.size(); ++i) {
        if (literal[i] == '<') {  // a placeholder: <plugin>, <policy>/<metric>, …
          i = literal.find('>', i);
          pattern += ".+";
        } else if (literal.compare(i, 3, "…") == 0) {
          i += 2;
          pattern += ".+";
        } else {
          pattern += std::string(std::strchr(".+*?()[]{}|^$\\", literal[i]) ? "\\" : "") + literal[i];
        }
      }
      names.push_back({split, std::regex(pattern), literal});
    }
  }
  return names;
}

TEST(Docs, TheResultsGuideNamesEveryMetricARunLogs) {
  // A tiny Trees run with the optional signals on: the value baseline, the dense reward, the
  // entropy bonus, replay, the anytime loss, the leaf/internal classifier, an evaluation policy,
  // greedy evaluation.
  const std::string dir = htm::testing::fresh_dir("docs_metrics");
  const std::string file = dir + "/all.toml";
  std::ofstream(file) << "[experiment]\nname = \"docs-metrics\"\nseeds = [0]\n"
                      << "[dataset]\nplugin = \"trees\"\ntokens = 8\ntrain_size = 64\ntest_size = 32\n"
                      << "[adapter]\nplugin = \"points\"\n[loss.point_set]\n[policy]\nplugin = \"learned\"\n"
                      << "[model]\ndim = 16\nheads = 2\nlayers = 3\nmlp_ratio = 2\nleaf_classifier = true\n"
                      << "[train]\nepochs = 1\nbatch_size = 16\nlog_every = 1\nrho0 = 1.0\nimages = 2\n"
                      << "anytime = 0.5\neval_policies = [\"random\"]\neval_greedy = true\n"
                      << "[estimator]\nbaseline = \"value\"\ndense = 0.1\nentropy = 0.01\nreplay = 4\n"
                      << "[runtime]\nthreads = 1\nresults = \"" << dir << "/htm.sqlite\"\n"
                      << "artifacts = \"" << dir << "/runs\"\n";
  RunRequest request;
  request.file = file;
  ASSERT_EQ(run_experiment(request, htm::testing::plugins()), 0);
  ResultsStore store(dir + "/htm.sqlite");
  const auto logged = store.query("SELECT DISTINCT split, name FROM metrics ORDER BY split, name");
  const std::vector<LoggedName> documented = documented_names();
  ASSERT_GT(documented.size(), 20u);
  std::set<std::string> seen;
  for (const auto& row : logged.rows) {
    const std::string& split = row[0];
    const std::string& name = row[1];
    seen.insert(name);
    bool found = false;
    for (const LoggedName& d : documented) found |= d.split == split && std::regex_match(name, d.pattern);
    EXPECT_TRUE(found) << "docs/results.md does not name " << split << " metric '" << name << "'";
  }
  // The signals this run switched on are among what it logged (so the check above saw them).
  for (const char* name : {"policy_entropy", "policy_value_error", "policy_pair_error", "policy_replay_weight",
                           "loss/anytime", "under/random/mse", "sampled/mse", "leaf_accuracy", "grad_norm/policy"})
    EXPECT_TRUE(seen.count(name)) << name << " was not logged";
}

}  // namespace
}  // namespace htm
