// `htm sample RUN -n N`: generation (paper A.1, HTM slides). A Gaussian mixture is fitted to the
// bottleneck embeddings of training samples, roots are drawn from it and decoded; for sets the
// leaf/internal classifier decides where to stop unmerging, for images the schedule does.
#include "commands/sample.h"

#include <cstdio>

#include <torch/torch.h>

#include "commands/runner.h"
#include "htm/error.h"
#include "model/gmm.h"
#include "report/pictures.h"
#include "store/results_store.h"
#include "train/checkpoint_file.h"
#include "train/experiment.h"

namespace htm {
namespace {

struct StoredRun {
  std::string config_toml, artifact_dir, status, variant;
  int64_t seed = 0;
};

StoredRun find_run(ResultsStore& store, int64_t run_id) {
  auto result = store.query("SELECT config_toml, artifact_dir, status, variant, seed FROM runs WHERE id = ?", {run_id});
  if (result.rows.empty())
    throw Error("no run " + std::to_string(run_id) + " in " + store.path() + " (see `htm runs`)");
  const auto& row = result.rows[0];
  return {row[0], row[1], row[2], row[3], std::stoll(row[4])};
}

// The run's model with its trained weights.
Experiment load_run(const StoredRun& run, int64_t run_id, const Registry& registry) {
  const std::string checkpoint = readable_checkpoint(run_id, run.artifact_dir, run.status);
  // The stored config is a complete experiment file: resolve it as one.
  const ResolvedConfig config = ExperimentFile::parse(run.config_toml, "run " + std::to_string(run_id) + "'s config")
                                    .resolve("default", registry);
  Experiment ex = assemble(config, registry, run.seed);
  torch::serialize::InputArchive archive;
  archive.load_from(checkpoint);
  ex.model->load(archive);
  ex.model->to(ex.device);  // a checkpoint's tensors load where they were saved
  ex.model->eval();
  return ex;
}

// Row-major n×d bottleneck embeddings of the first n training samples.
std::vector<double> root_embeddings(Experiment& ex, HtmModelImpl& model, int64_t n, int64_t* dim) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  std::vector<torch::Tensor> roots;
  for (int64_t i = 0; i < n; i += 256) {
    auto batch = on_device(ex.dataset->get(Split::train, torch::arange(i, std::min(n, i + 256))), ex.device);
    ForwardHooks truth;  // for a model trained under an oracle policy
    truth.tree = batch.tree;
    roots.push_back(model.forward(batch.input, ex.schedule, gen, &truth).root.flatten(1));
  }
  auto all = torch::cat(roots).to(torch::kCPU, torch::kDouble).contiguous();  // host: the mixture is fitted there
  *dim = all.size(1);
  return std::vector<double>(all.data_ptr<double>(), all.data_ptr<double>() + all.numel());
}

// Generated samples in rows of `columns` (images padded with grey; sets with NaN, drawn as nothing).
std::vector<torch::Tensor> grid_rows(const std::vector<torch::Tensor>& samples, int64_t columns) {
  int64_t most = 0;
  for (const auto& s : samples) most = std::max(most, s.size(0));
  std::vector<torch::Tensor> padded;
  for (const auto& s : samples) {
    if (s.dim() == 2 && s.size(0) < most)
      padded.push_back(torch::cat({s, torch::full({most - s.size(0), s.size(1)}, NAN)}));
    else
      padded.push_back(s);
  }
  std::vector<torch::Tensor> rows;
  for (size_t i = 0; i < padded.size(); i += columns) {
    std::vector<torch::Tensor> row(padded.begin() + i, padded.begin() + std::min(padded.size(), i + columns));
    while (static_cast<int64_t>(row.size()) < columns)
      row.push_back(row[0].dim() == 2 ? torch::full_like(row[0], NAN) : torch::zeros_like(row[0]));
    rows.push_back(torch::stack(row));
  }
  return rows;
}

}  // namespace

int sample_run(const SampleRequest& request, const Registry& registry) {
  if (request.count < 1) throw Error("-n must be at least 1");
  ResultsStore store(request.db);
  const StoredRun run = find_run(store, request.run_id);
  Experiment ex = load_run(run, request.run_id, registry);
  auto model = std::dynamic_pointer_cast<HtmModelImpl>(ex.model);
  if (!model || ex.config.settings.model.task != Task::reconstruct)
    throw Error("run " + std::to_string(request.run_id) + " is not an HTM autoencoder; only those generate");
  use_runtime(ex.config.settings.runtime, ex.config.settings.runtime.threads);

  const int64_t n = std::min(request.fit_samples, ex.dataset->size(Split::train));
  int64_t dim = 0;
  const auto roots = root_embeddings(ex, *model, n, &dim);
  // Full covariances cost O(d²) per point and component in each EM step: minutes beyond ~128.
  const bool full = request.covariance == "full" || (request.covariance == "auto" && dim <= 128);
  const auto covariance = full ? Covariance::full : Covariance::diagonal;
  GaussianMixture gmm(roots, n, dim, request.components, covariance, static_cast<uint64_t>(request.seed));
  const auto drawn = gmm.sample(request.count, static_cast<uint64_t>(request.seed) + 1);

  const int64_t C = ex.config.settings.model.dim;
  auto root_tokens =
      torch::tensor(drawn, torch::kDouble).to(ex.device, torch::kFloat).view({request.count, dim / C, C});
  const auto shape = ex.dataset->sample_shape();
  const bool sets = shape.size() == 2;
  const bool by_classifier = sets && model->has_leaf_classifier() && request.decode == "classifier";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(request.seed) + 2);
  const auto samples = model->generate(root_tokens, ex.schedule, gen, by_classifier, request.leaf_threshold);

  // By default beside the checkpoint, in the folder load_run found htm had written.
  const std::string out = request.out.empty() ? run.artifact_dir + "/samples.png" : request.out;
  const auto rows = grid_rows(samples, std::min<int64_t>(8, request.count));
  if (sets)
    write_point_grid(out, rows);
  else
    write_image_grid(out, rows);
  store.add_artifact(request.run_id, "samples", out, 0);

  std::printf(
      "run %lld: fitted %lld Gaussians (%s covariance) to %lld root embeddings of dimension %lld "
      "(mean log-likelihood %.2f)\n",
      static_cast<long long>(request.run_id), static_cast<long long>(request.components), full ? "full" : "diagonal",
      static_cast<long long>(n), static_cast<long long>(dim), gmm.mean_log_likelihood(roots, n));
  if (sets) {
    int64_t least = INT64_MAX, most = 0, total = 0, exact = 0;
    for (const auto& s : samples) {
      least = std::min(least, s.size(0));
      most = std::max(most, s.size(0));
      total += s.size(0);
      exact += s.size(0) == shape[0] ? 1 : 0;
    }
    std::printf(
        "decoded %s: %lld samples with %lld to %lld elements (mean %.2f; the data has %lld; "
        "%lld of %lld exactly)\n",
        by_classifier ? ("by the leaf/internal classifier (leaf when P(leaf) > " +
                         std::to_string(request.leaf_threshold).substr(0, 4) + ")")
                            .c_str()
                      : "with the full schedule",
        static_cast<long long>(request.count), static_cast<long long>(least), static_cast<long long>(most),
        static_cast<double>(total) / request.count, static_cast<long long>(shape[0]), static_cast<long long>(exact),
        static_cast<long long>(request.count));
  }
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace htm
