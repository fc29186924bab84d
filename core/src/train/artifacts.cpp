// What a run leaves besides metrics: its checkpoint and its pictures.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <torch/torch.h>

#include "dist/communicator.h"
#include "hierarchy/tree_scoring.h"
#include "htm/error.h"
#include "report/pictures.h"
#include "train/checkpoint_file.h"
#include "train/estimator/estimator.h"
#include "train/optimizer.h"
#include "train/trainer.h"

namespace htm {

namespace {

// Writes `bytes` to `path` through `path`.tmp, synced, then renamed over it. On any failure the
// temporary file is removed and the old checkpoint stays.
void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  FILE* file = std::fopen(tmp.c_str(), "wb");
  bool ok = file != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size() &&
            std::fflush(file) == 0 && fsync(fileno(file)) == 0;
  int error = errno;
  if (file != nullptr && std::fclose(file) != 0 && ok) ok = false, error = errno;
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) ok = false, error = errno;
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error("cannot write the checkpoint '" + path + "': " + std::strerror(error));
  }
}

torch::Tensor scalar(int64_t v) { return torch::tensor({v}, torch::kLong); }
torch::Tensor scalar(double v) { return torch::tensor({v}, torch::kDouble); }

template <class T>
T read_scalar(torch::serialize::InputArchive& archive, const std::string& key) {
  torch::Tensor t;
  archive.read(key, t);
  return t.item<T>();
}

void set_state(at::Generator generator, const torch::Tensor& state) {  // a handle: shares the stream
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace

void Trainer::save_checkpoint(const LoopState& s, const FusedAdamW& optimizer, const FusedAdamW& policy_optimizer,
                              const Estimator& estimator, const at::Generator& data_gen) {
  if (!primary()) return;  // every rank holds the same state: rank 0 keeps it
  const std::string path = checkpoint_file(artifact_dir_);
  torch::serialize::OutputArchive archive;
  ex_.model->save(archive);
  torch::serialize::OutputArchive state;
  state.write("step", scalar(s.step));
  state.write("epoch", scalar(s.epoch));
  state.write("batch", scalar(s.batch));
  if (s.order.defined()) state.write("order", s.order);
  state.write("epoch_loss", scalar(s.epoch_loss));
  state.write("epoch_batches", scalar(s.epoch_batches));
  state.write("running_loss", scalar(s.running_loss));
  state.write("images_per_s", scalar(s.images_per_s));
  state.write("images", scalar(s.images));
  state.write("seconds", scalar(s.seconds));
  state.write("test_mse", scalar(s.test_mse));
  state.write("accuracy", scalar(s.accuracy));
  state.write("baseline", scalar(estimator.baseline()));
  state.write("has_baseline", scalar(static_cast<int64_t>(estimator.has_baseline())));
  state.write("generator", generator_.get_state());
  state.write("data_generator", data_gen.get_state());
  state.write("default_generator", at::detail::getDefaultCPUGenerator().get_state());
  optimizer.save(state, "optimizer");
  policy_optimizer.save(state, "policy_optimizer");
  archive.write(kResumeState, state);
  // Serialised in memory first: libtorch's file writer aborts the process when the disk fills.
  std::ostringstream bytes;
  archive.save_to(bytes);
  write_atomically(path, bytes.str());
  if (!store_broken_) store_.add_artifact(run_id_, "checkpoint", path, s.step);
}

bool Trainer::load_checkpoint(LoopState& s, FusedAdamW& optimizer, FusedAdamW& policy_optimizer, Estimator& estimator,
                              at::Generator& data_gen) {
  const std::string path = checkpoint_file(artifact_dir_);
  std::string bytes;
  if (primary() && std::filesystem::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) throw Error("cannot resume from '" + path + "': cannot read it");
  }
  if (options_.comm != nullptr) bytes = options_.comm->broadcast_bytes(bytes);  // rank 0's file, everywhere
  if (bytes.empty()) return false;
  torch::serialize::InputArchive archive, state;
  try {
    archive.load_from(bytes.data(), bytes.size());
  } catch (const c10::Error& e) {
    throw Error("cannot resume from '" + path + "': " + e.what_without_backtrace());
  }
  if (!archive.try_read(kResumeState, state)) return false;  // weights only: an older htm wrote it
  ex_.model->load(archive);
  ex_.model->to(ex_.device);  // a checkpoint's tensors load where they were saved
  s.step = read_scalar<int64_t>(state, "step");
  s.epoch = read_scalar<int64_t>(state, "epoch");
  s.batch = read_scalar<int64_t>(state, "batch");
  state.try_read("order", s.order);
  s.epoch_loss = read_scalar<double>(state, "epoch_loss");
  s.epoch_batches = read_scalar<int64_t>(state, "epoch_batches");
  s.running_loss = read_scalar<double>(state, "running_loss");
  s.images_per_s = read_scalar<double>(state, "images_per_s");
  s.images = read_scalar<int64_t>(state, "images");
  s.seconds = read_scalar<double>(state, "seconds");
  s.test_mse = read_scalar<double>(state, "test_mse");
  s.accuracy = read_scalar<double>(state, "accuracy");
  estimator.restore_baseline(read_scalar<double>(state, "baseline"), read_scalar<int64_t>(state, "has_baseline") != 0);
  torch::Tensor generator, data_generator, default_generator;
  state.read("generator", generator);
  state.read("data_generator", data_generator);
  state.read("default_generator", default_generator);
  set_state(generator_, generator);
  set_state(data_gen, data_generator);
  set_state(at::detail::getDefaultCPUGenerator(), default_generator);
  optimizer.load(state, "optimizer");
  policy_optimizer.load(state, "policy_optimizer");
  return true;
}

void Trainer::save_pictures(int64_t step, const std::string& tag) {
  if (!primary()) return;
  const int64_t n = std::min(ex_.config.settings.train.images, ex_.dataset->size(Split::test));
  const auto shape = ex_.dataset->sample_shape();
  const bool images = shape.size() == 3, sets = shape.size() == 2 && (shape[1] == 2 || shape[1] == 4);
  if (n <= 0 || !(images || sets)) return;
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 7919);
  Batch batch = on_device(ex_.dataset->get(Split::test, torch::arange(n)), ex_.device);
  ForwardHooks with_tree;  // a policy that reads the truth gets it
  with_tree.tree = batch.tree;
  auto out = ex_.model->forward(batch.input, ex_.schedule, gen, &with_tree);
  ex_.model->train();
  if (out.output.sizes() != batch.input.sizes()) return;
  const std::string path = artifact_dir_ + "/reconstructions_" + tag + ".png";
  if (images)
    write_image_grid(path, {batch.input, out.output});
  else
    write_point_grid(path, {batch.input, out.output});
  store_.add_artifact(run_id_, "reconstructions", path, step);
  if (!batch.tree.defined() || out.merges.empty()) return;
  // The slides' policy diagrams: the merges of each layer, learned beside true.
  const auto truth = true_trees(batch.tree);
  const auto learned = merge_trees(out.merges, batch.input.size(1), batch.input.size(0));
  std::vector<std::vector<MergeTree>> panels;
  for (size_t b = 0; b < truth.size(); ++b) panels.push_back({learned[b], truth[b]});
  const std::string policy_path = artifact_dir_ + "/policy_" + tag + ".png";
  write_policy_diagram(policy_path, batch.input, panels,
                       {"the " + ex_.config.policy.name + " policy's merges", "true"});
  store_.add_artifact(run_id_, "policy", policy_path, step);
}

void Trainer::save_step_pictures(int64_t step) {
  if (!primary()) return;
  at::Generator global = at::detail::getDefaultCPUGenerator();  // a plugin may draw from it: put it back
  const torch::Tensor state = global.get_state();
  save_pictures(step, "step" + std::to_string(step));
  if (const at::Tensor logits = first_layer_logits(); logits.defined()) save_policy_heatmap(logits, step);
  global.set_state(state);
}

void Trainer::save_policy_heatmap(const at::Tensor& logits, int64_t step) {
  if (!primary() || logits.dim() != 3 || logits.size(0) < 2) return;
  const int64_t T = logits.size(1);
  auto host = logits.to(torch::kCPU, torch::kFloat);  // host: a picture
  auto masked = host.masked_fill(torch::eye(T, torch::kBool), -INFINITY);
  auto partners = torch::softmax(masked, -1);  // row i: where token i would merge
  // Named by its step: runtime.pictures_every keeps one per epoch (the pages' step sliders).
  const std::string path = artifact_dir_ + "/policy_heatmap_step" + std::to_string(step) + ".png";
  write_heatmaps(path, {partners.mean(0), partners[0], partners[1]},
                 {"mean over " + std::to_string(logits.size(0)) + " test inputs", "test input 0", "test input 1"});
  store_.add_artifact(run_id_, "policy_heatmap", path, step);
}

}  // namespace htm
