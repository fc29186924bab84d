// What a run leaves besides metrics: its checkpoint and its pictures.
#include <filesystem>

#include <torch/torch.h>

#include "hierarchy/tree_scoring.h"
#include "report/pictures.h"
#include "train/trainer.h"

namespace htm {

void Trainer::save_checkpoint(int64_t step) {
  // Written beside its final name, then renamed: a crash never leaves a torn checkpoint.
  const std::string path = artifact_dir_ + "/checkpoint.pt", tmp = path + ".tmp";
  torch::serialize::OutputArchive archive;
  ex_.model->save(archive);
  archive.save_to(tmp);
  std::filesystem::rename(tmp, path);
  store_.add_artifact(run_id_, "checkpoint", path, step);
}

void Trainer::save_pictures(int64_t step, const std::string& tag) {
  const int64_t n = std::min(ex_.config.settings.train.images, ex_.dataset->size(Split::test));
  const auto shape = ex_.dataset->sample_shape();
  const bool images = shape.size() == 3, sets = shape.size() == 2 && (shape[1] == 2 || shape[1] == 4);
  if (n <= 0 || !(images || sets)) return;
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 7919);
  Batch batch = ex_.dataset->get(Split::test, torch::arange(n));
  ForwardHooks with_tree;  // a policy that reads the truth gets it
  with_tree.tree = batch.tree;
  auto out = ex_.model->forward(batch.input, ex_.schedule, gen, &with_tree);
  ex_.model->train();
  if (out.output.sizes() != batch.input.sizes()) return;
  const std::string path = artifact_dir_ + "/reconstructions_" + tag + ".png";
  if (images) write_image_grid(path, {batch.input, out.output});
  else write_point_grid(path, {batch.input, out.output});
  store_.add_artifact(run_id_, "reconstructions", path, step);
  if (!batch.tree.defined() || out.merges.empty()) return;
  // The slides' policy diagrams: the merges of each layer, learned beside true.
  const auto truth = true_trees(batch.tree);
  const auto learned = merge_trees(out.merges, batch.input.size(1));
  std::vector<std::vector<MergeTree>> panels;
  for (size_t b = 0; b < truth.size(); ++b) panels.push_back({learned[b], truth[b]});
  const std::string policy_path = artifact_dir_ + "/policy_" + tag + ".png";
  write_policy_diagram(policy_path, batch.input, panels, {"learned (" + ex_.config.policy.name + ")", "true"});
  store_.add_artifact(run_id_, "policy", policy_path, step);
}

}  // namespace htm
