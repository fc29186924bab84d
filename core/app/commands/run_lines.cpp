// What htm run prints of a run that finished: its result beside its references, its time, its
// memory against the estimate, and the hierarchy scores beside the random-merge floor.
#include "commands/run_lines.h"

#include <cmath>
#include <cstdio>
#include <map>

namespace htm {

// A finished run's lines: its result beside its references, its memory against the estimate,
// and, on data with a true hierarchy, the scores that matter beside the random-merge floor.
void print_finished(ResultsStore& store, const FinishedRun& run, int verbosity) {
  const int64_t run_id = run.run_id, parameters = run.parameters;
  const std::string& label = run.label;
  const TrainSummary& s = run.summary;
  const std::optional<MemoryEstimate>& memory = run.memory;
  const auto id = static_cast<long long>(run_id);
  if (std::isnan(s.accuracy))
    std::printf(
        "[%s] run %lld finished: test MSE %.5f vs mean-image baseline %.5f (%.1f%%), %lld steps in %.1f s "
        "(%.1f img/s)\n",
        label.c_str(), id, s.test_mse, s.reference.mean_mse, 100.0 * s.test_mse / s.reference.mean_mse,
        static_cast<long long>(s.steps), s.seconds, s.images_per_s);
  else
    std::printf("[%s] run %lld finished: test accuracy %.4f, %lld parameters, %lld steps in %.1f s (%.1f img/s)\n",
                label.c_str(), id, s.accuracy, static_cast<long long>(parameters), static_cast<long long>(s.steps),
                s.seconds, s.images_per_s);
  std::printf("[%s] time: %s\n", label.c_str(), describe(s.time).c_str());
  if (!s.graphs.empty()) std::printf("[%s] cuda graph: %s\n", label.c_str(), s.graphs.c_str());
  const BaselineScores& r = s.reference;
  if (!std::isnan(r.pca_mse) && std::isnan(s.accuracy))
    std::printf("[%s] reference: PCA with the bottleneck's %lld floats %.5f (%.1f%% of the mean-image error)\n",
                label.c_str(), static_cast<long long>(r.pca_components), r.pca_mse, 100.0 * r.pca_mse / r.mean_mse);
  if (!std::isnan(r.linear_accuracy) && !std::isnan(s.accuracy))
    std::printf("[%s] reference: a linear (ridge) classifier on the raw input %.4f\n", label.c_str(),
                r.linear_accuracy);
  if (memory && verbosity >= 1)
    std::printf("[%s] memory: peak %.0f MiB resident; estimated %.0f MiB before the first step (%+.0f%%)\n",
                label.c_str(), peak_resident_mib(), memory->total_mib(),
                100.0 * (memory->total_mib() / peak_resident_mib() - 1));
  const auto f1 = store.query(
      "SELECT name, value FROM latest_metrics WHERE run_id = ? AND split = 'test' AND name IN "
      "('cluster_f1', 'sibling_f1', 'random/cluster_f1', 'random/sibling_f1') ORDER BY name",
      {run_id});
  std::map<std::string, std::string> scores;
  for (const auto& row : f1.rows) scores[row[0]] = row[1];
  if (scores.count("cluster_f1"))
    std::printf("[%s] hierarchy: cluster F1 %s (random merges %s), sibling F1 %s (random %s)\n", label.c_str(),
                scores["cluster_f1"].c_str(), scores["random/cluster_f1"].c_str(), scores["sibling_f1"].c_str(),
                scores["random/sibling_f1"].c_str());
}

}  // namespace htm
