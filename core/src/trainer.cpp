#include "trainer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include "baselines.h"
#include "optimizer.h"
#include "htm/error.h"
#include "pictures.h"
#include "policy_metrics.h"
#include "tree_scoring.h"

namespace htm {
namespace {

std::atomic<bool> g_interrupt{false};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string clock_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

int64_t limit(int64_t requested, int64_t available) {
  return requested > 0 ? std::min(requested, available) : available;
}

}  // namespace

void request_interrupt() { g_interrupt = true; }
bool interrupt_requested() { return g_interrupt; }
void reset_interrupt() { g_interrupt = false; }

int64_t sample_depth(double rho, int64_t layers, at::Generator generator) {
  // P(d) ∝ ρ^d on 1..L, drawn by inverting the cumulative distribution.
  std::vector<double> weight(layers);
  double total = 0;
  for (int64_t d = 1; d <= layers; ++d) total += (weight[d - 1] = std::pow(rho, d));
  if (!(total > 0)) return 1;
  double u = torch::rand({1}, generator, torch::kDouble).item<double>() * total;
  for (int64_t d = 1; d <= layers; ++d)
    if ((u -= weight[d - 1]) < 0) return d;
  return layers;
}

torch::Tensor surrogate_objective(const torch::Tensor& per_sample_loss,
                                  const torch::Tensor& log_prob, const Estimator& estimator) {
  auto loss = per_sample_loss.mean();
  if (!log_prob.defined()) return loss;
  if (estimator.per_sample_reward)
    return loss + ((per_sample_loss.detach() - estimator.baseline) * log_prob).mean();
  return loss + (loss.detach() - estimator.baseline) * log_prob.sum();
}

double rho_at(double rho0, double rho_step, int64_t epoch) {
  return std::min(1.0, rho0 + rho_step * static_cast<double>(epoch));
}

double rho_ramp_at(double rho0, double rho_end, double ramp, int64_t step, int64_t total_steps) {
  const double length = ramp * static_cast<double>(total_steps);
  const double t = length > 0 ? std::min(1.0, static_cast<double>(step) / length) : 1.0;
  return rho0 + (rho_end - rho0) * t;
}

double lr_at(const LrSchedule& s, int64_t step, int64_t epoch) {
  double lr = s.lr;
  if (s.cosine) {
    const double span = static_cast<double>(std::max<int64_t>(1, s.total_steps - s.warmup_steps));
    const double t = std::clamp(static_cast<double>(step - s.warmup_steps) / span, 0.0, 1.0);
    lr *= 0.5 * (1 + std::cos(M_PI * t));
  } else {
    for (int64_t e : s.decay_epochs)
      if (e > 0 && e <= epoch) lr *= s.decay_factor;
  }
  if (step < s.warmup_steps) lr *= static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps + 1);
  return lr;
}

Trainer::Trainer(Experiment& experiment, ResultsStore& store, int64_t run_id,
                 std::string artifact_dir, int64_t seed, std::string label)
    : ex_(experiment),
      store_(store),
      run_id_(run_id),
      artifact_dir_(std::move(artifact_dir)),
      seed_(seed),
      label_(std::move(label)),
      generator_(at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed))) {}

ForwardHooks Trainer::hooks(int64_t epoch, int64_t step, bool training) {
  ForwardHooks h;
  h.layer_entry = [this, epoch, step, training](const torch::Tensor& tokens, int64_t depth) {
    LayerEntry entry{depth, epoch, step, training, generator_};
    auto x = tokens;
    for (auto& term : ex_.losses) x = term.loss->enter_layer(x, entry);
    return x;
  };
  return h;
}

torch::Tensor training_objective(const std::vector<WeightedLoss>& losses, const ForwardResult& out,
                                 const Batch& batch, int64_t epoch, int64_t step, bool training,
                                 bool teacher_forced, std::vector<Metric>* terms) {
  LossContext ctx;
  ctx.input = batch.input;
  ctx.output = out.output;
  ctx.labels = batch.labels;
  ctx.encoder_tokens = out.encoder_tokens;
  ctx.decoder_tokens = out.decoder_tokens;
  ctx.epoch = epoch;
  ctx.step = step;
  ctx.training = training;
  ctx.teacher_forced = teacher_forced;
  if (teacher_forced) {
    for (const auto& m : out.merges) ctx.merge_log_probs.push_back(m.log_prob);
    ctx.unmerge_log_probs = out.unmerge_log_probs;
  }
  torch::Tensor total;
  for (const auto& term : losses) {
    if (term.weight == 0) continue;
    auto value = term.loss->per_sample(ctx);
    if (value.dim() != 1 || value.size(0) != batch.input.size(0))
      throw Error("loss plugin '" + term.name + "' returned shape " +
                  c10::str(value.sizes()) + ", expected one value per sample");
    if (terms != nullptr) terms->push_back({"loss/" + term.name, value.mean().item<double>()});
    total = total.defined() ? total + term.weight * value : term.weight * value;
  }
  if (!total.defined()) throw Error("no loss has a non-zero weight");
  return total;  // B
}

Trainer::Eval Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  const int64_t n = limit(ex_.config.integer("train.eval_samples"), ex_.dataset->size(Split::test));
  const int64_t bs = ex_.config.integer("train.eval_batch_size");
  // A fixed generator: the same model evaluates to the same number.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 7919);
  double error_sum = 0, leaf_hits = 0;
  int64_t reconstructed = 0, correct = 0, labelled = 0;
  std::map<std::string, double> loss_sums;
  TreeScoreMean learned;
  const ForwardHooks eval_hooks = hooks(0, 0, false);
  for (int64_t i = 0; i < n; i += bs) {
    if (interrupt_requested()) throw Interrupted();
    Batch batch = ex_.dataset->get(Split::test, torch::arange(i, std::min(n, i + bs)));
    auto out = ex_.model->forward(batch.input, ex_.schedule, gen, &eval_hooks);
    const int64_t B = batch.input.size(0);
    if (out.output.sizes() == batch.input.sizes()) {
      error_sum += ex_.model->reconstruction_error(out.output, batch.input).sum().item<double>();
      reconstructed += B;
    } else if (out.output.dim() == 2 && batch.labels.defined()) {
      correct += (out.output.argmax(1) == batch.labels).sum().item<int64_t>();
      labelled += B;
    }
    if (batch.tree.defined() && !out.merges.empty()) {
      const auto truth = true_trees(batch.tree);
      const auto predicted = merge_trees(out.merges, batch.input.size(1));
      for (size_t b = 0; b < truth.size(); ++b) learned.add(predicted[b], truth[b]);
    }
    if (out.leaf_loss.defined()) leaf_hits += out.leaf_accuracy * static_cast<double>(B);
    std::vector<Metric> terms;
    training_objective(ex_.losses, out, batch, 0, 0, false, false, &terms);
    if (out.leaf_loss.defined()) terms.push_back({"loss/leaf_classifier", out.leaf_loss.mean().item<double>()});
    for (const auto& t : terms) loss_sums[t.name] += t.value * static_cast<double>(B);
  }
  ex_.model->train();
  Eval e;
  e.mse = reconstructed > 0 ? error_sum / static_cast<double>(reconstructed) : std::nan("");
  e.accuracy = labelled > 0 ? static_cast<double>(correct) / static_cast<double>(labelled) : std::nan("");
  for (const auto& [name, sum] : loss_sums) e.metrics.push_back({name, sum / static_cast<double>(n)});
  if (loss_sums.count("loss/leaf_classifier")) e.metrics.push_back({"leaf_accuracy", leaf_hits / static_cast<double>(n)});
  if (learned.samples() > 0) {
    for (const auto& m : learned.metrics("")) e.metrics.push_back(m);
    for (const auto& m : reference_scores(n)) e.metrics.push_back(m);
  }
  return e;
}

const std::vector<Metric>& Trainer::reference_scores(int64_t n_samples) {
  if (!reference_scores_.empty()) return reference_scores_;
  const Batch batch = ex_.dataset->get(Split::test, torch::arange(n_samples));
  const auto truth = true_trees(batch.tree);
  std::mt19937_64 rng(static_cast<uint64_t>(seed_) + 104729);
  TreeScoreMean random, agglomerative;
  int64_t reachable = 0;
  std::map<std::string, bool> reachable_shape;  // the answer depends on the tree's shape alone
  for (size_t b = 0; b < truth.size(); ++b) {
    random.add(random_merges(truth[b].leaves, ex_.schedule, rng), truth[b]);
    agglomerative.add(agglomerative_merges(token_positions(batch.input[b]), ex_.schedule), truth[b]);
    auto [it, fresh] = reachable_shape.try_emplace(shape_code(truth[b]), false);
    if (fresh) it->second = schedule_reaches(truth[b], ex_.schedule);
    reachable += it->second ? 1 : 0;
  }
  const int64_t n = static_cast<int64_t>(truth.size());
  if (reachable < n) {
    std::string schedule;
    for (int64_t r : ex_.schedule) schedule += (schedule.empty() ? "" : ", ") + std::to_string(r);
    std::fprintf(stderr, "[%s] note: the merge schedule [%s] cannot build the true tree of %lld of %lld "
                 "test samples, so no policy can score 1 on them\n", label_.c_str(), schedule.c_str(),
                 static_cast<long long>(n - reachable), static_cast<long long>(n));
  }
  reference_scores_ = random.metrics("random/");
  for (const auto& m : agglomerative.metrics("agglomerative/")) reference_scores_.push_back(m);
  reference_scores_.push_back({"truth_reachable", static_cast<double>(reachable) / static_cast<double>(n)});
  return reference_scores_;
}

void Trainer::log_policy_spread(int64_t step, int64_t epoch) {
  // Figure 4's question, as two numbers over the first test inputs (see policy_metrics.h).
  const int64_t n = std::min<int64_t>(64, ex_.dataset->size(Split::test));
  if (n < 2 || ex_.schedule.empty() || ex_.schedule[0] == 0) return;
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  auto logits = ex_.model->first_merge_logits(ex_.dataset->get(Split::test, torch::arange(n)).input,
                                              ex_.schedule[0]);
  ex_.model->train();
  if (!logits.defined()) return;
  PolicySpread spread = policy_spread(logits);
  store_.log_metrics(run_id_, step, epoch, "test",
                     {{"policy_variation", spread.variation}, {"policy_structure", spread.structure}});
}

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
  const int64_t n = std::min(ex_.config.integer("train.images"), ex_.dataset->size(Split::test));
  const auto shape = ex_.dataset->sample_shape();
  const bool images = shape.size() == 3, sets = shape.size() == 2 && (shape[1] == 2 || shape[1] == 4);
  if (n <= 0 || !(images || sets)) return;
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 7919);
  Batch batch = ex_.dataset->get(Split::test, torch::arange(n));
  auto out = ex_.model->forward(batch.input, ex_.schedule, gen);
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

void Trainer::progress(int64_t epoch, int64_t step, int64_t total_steps, double loss, double rho,
                       int64_t depth, double images_per_s, double elapsed_s, bool final_line) {
  static const bool tty = isatty(fileno(stderr));
  const double eta = step > 0 ? elapsed_s / step * (total_steps - step) : 0;
  std::fprintf(stderr, "%s[%s] epoch %lld step %lld/%lld loss %.5f rho %.2f depth %lld %.1f img/s ETA %s%s",
               tty ? "\r" : "", label_.c_str(), static_cast<long long>(epoch + 1),
               static_cast<long long>(step), static_cast<long long>(total_steps), loss, rho,
               static_cast<long long>(depth), images_per_s, clock_text(eta).c_str(),
               tty && !final_line ? "   " : "\n");
  std::fflush(stderr);
}

TrainSummary Trainer::run() {
  const auto& cfg = ex_.config;
  Dataset& data = *ex_.dataset;
  std::filesystem::create_directories(artifact_dir_);

  const int64_t n_train = limit(cfg.integer("train.train_samples"), data.size(Split::train));
  const int64_t batch_size = cfg.integer("train.batch_size");
  const int64_t epochs = cfg.integer("train.epochs");
  const int64_t steps_per_epoch = (n_train + batch_size - 1) / batch_size;
  const int64_t total_steps = limit(cfg.integer("train.max_steps"), epochs * steps_per_epoch);
  const int64_t log_every = std::max<int64_t>(1, cfg.integer("train.log_every"));
  const int64_t eval_every = cfg.integer("train.eval_every");
  const int64_t layers = static_cast<int64_t>(ex_.schedule.size());
  const bool score_function = cfg.text("estimator.method") == "score_function";
  const bool stochastic_depth = cfg.flag("train.stochastic_depth");
  const bool per_sample_reward = cfg.text("estimator.reward") == "sample";
  const bool ema_baseline = cfg.text("estimator.baseline") == "ema";
  const double baseline_decay = cfg.number("estimator.baseline_decay");
  const double grad_clip = cfg.number("train.grad_clip");
  LrSchedule lr_schedule;
  lr_schedule.lr = cfg.number("train.lr");
  lr_schedule.warmup_steps = cfg.integer("train.warmup_steps");
  lr_schedule.cosine = cfg.text("train.lr_schedule") == "cosine";
  lr_schedule.decay_epochs = cfg.integers("train.lr_decay_epochs");
  lr_schedule.decay_factor = cfg.number("train.lr_decay_factor");
  lr_schedule.total_steps = total_steps;
  const bool rho_by_step = cfg.text("train.rho_schedule") == "step";
  const double rho0 = cfg.number("train.rho0"), rho_step = cfg.number("train.rho_step");
  const double rho_end = cfg.number("train.rho_end"), rho_ramp = cfg.number("train.rho_ramp");
  double lr = lr_schedule.lr;

  FusedAdamW optimizer(ex_.model->parameters(), lr, cfg.number("train.weight_decay"));
  auto data_gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 1);

  TrainSummary summary;
  summary.reference = baseline_scores(data, *ex_.model, n_train,
                                      limit(cfg.integer("train.eval_samples"), data.size(Split::test)),
                                      ex_.latent_floats);
  const BaselineScores& reference = summary.reference;
  std::vector<Metric> first = {{"baseline_mse", reference.mean_mse},
                               {"parameters", static_cast<double>(ex_.parameters)},
                               {"participating_parameters", static_cast<double>(ex_.participating)}};
  if (!std::isnan(reference.pca_mse)) {
    first.push_back({"baseline/pca_mse", reference.pca_mse});
    first.push_back({"baseline/pca_components", static_cast<double>(reference.pca_components)});
  }
  if (!std::isnan(reference.linear_accuracy)) first.push_back({"baseline/linear_accuracy", reference.linear_accuracy});
  store_.log_metrics(run_id_, 0, 0, "test", first);
  std::fprintf(stderr, "[%s] model: %lld parameters, %lld of them trained by this objective\n",
               label_.c_str(), static_cast<long long>(ex_.parameters),
               static_cast<long long>(ex_.participating));
  int64_t teacher_forced_steps = 0;  // §3.2.2's pre-training stage, if a loss asks for one
  for (const auto& term : ex_.losses)
    if (term.weight != 0) teacher_forced_steps = std::max(teacher_forced_steps, term.loss->teacher_forced_steps());

  auto log_eval = [&](int64_t step, int64_t epoch) {
    Eval e = evaluate();
    std::vector<Metric> m = e.metrics;
    if (!std::isnan(e.mse)) m.push_back({"mse", e.mse});
    if (!std::isnan(e.accuracy)) m.push_back({"accuracy", e.accuracy});
    store_.log_metrics(run_id_, step, epoch, "test", m);
    summary.test_mse = e.mse;
    summary.accuracy = e.accuracy;
    return e;
  };

  ex_.model->train();
  const auto t0 = Clock::now();
  double images_per_s = 0, running_loss = 0, ema_reward = 0;
  bool have_ema = false;
  int64_t step = 0, images = 0;
  for (int64_t epoch = 0; epoch < epochs && step < total_steps; ++epoch) {
    // ---- epoch set-up: the paper's ρ schedule rises per epoch
    const double epoch_rho = rho_at(rho0, rho_step, epoch);
    auto order = torch::randperm(data.size(Split::train), data_gen).narrow(0, 0, n_train);
    double epoch_loss = 0;
    int64_t epoch_batches = 0;

    for (int64_t b = 0; b < steps_per_epoch && step < total_steps; ++b) {
      if (interrupt_requested()) throw Interrupted();
      const auto step_t0 = Clock::now();
      // ---- learning rate and ρ for this step
      lr = lr_at(lr_schedule, step, epoch);
      optimizer.set_lr(lr);
      const double rho = rho_by_step ? rho_ramp_at(rho0, rho_end, rho_ramp, step, total_steps) : epoch_rho;
      // ---- forward at a sampled depth of the stochastic merging schedule
      // (a teacher-forced stage trains every layer at once, so it uses the full schedule)
      const bool teacher_forced = step < teacher_forced_steps;
      const int64_t depth = layers == 0                            ? 0
                            : teacher_forced || !stochastic_depth ? layers
                                                                  : sample_depth(rho, layers, generator_);
      const std::vector<int64_t> schedule(ex_.schedule.begin(), ex_.schedule.begin() + depth);
      Batch batch = data.get(Split::train, order.narrow(0, b * batch_size,
                                                       std::min(batch_size, n_train - b * batch_size)));
      const int64_t B = batch.input.size(0);
      const ForwardHooks step_hooks = hooks(epoch, step, true);
      auto out = teacher_forced
                     ? ex_.model->forward_teacher_forced(batch.input, schedule, generator_, &step_hooks)
                     : ex_.model->forward(batch.input, schedule, generator_, &step_hooks);
      std::vector<Metric> terms;
      auto per_sample = training_objective(ex_.losses, out, batch, epoch, step, true, teacher_forced, &terms);
      auto loss = per_sample.mean();

      // ---- surrogate for the discrete decisions (paper eq. 4): loss + sg[reward]·Σ log p
      Estimator estimator{per_sample_reward, ema_baseline && have_ema ? ema_reward : 0.0};
      auto total = score_function ? surrogate_objective(per_sample, out.log_prob, estimator) : loss;
      if (out.leaf_loss.defined()) {  // a probe on detached tokens: outside the policy's reward
        total = total + out.leaf_loss.mean();
        terms.push_back({"loss/leaf_classifier", out.leaf_loss.mean().item<double>()});
      }
      if (ema_baseline) {
        const double value = loss.item<double>();
        ema_reward = have_ema ? baseline_decay * ema_reward + (1 - baseline_decay) * value : value;
        have_ema = true;
      }

      // ---- backward and update
      optimizer.zero_grad();
      total.backward();
      const bool log_now = (step + 1) % log_every == 0 || step + 1 == total_steps;
      if (log_now) {  // per-block gradient norms, before clipping: where the signal reaches
        for (const auto& child : ex_.model->named_children()) {
          const auto params = child.value()->parameters();
          if (params.empty()) continue;
          std::vector<torch::Tensor> norms;
          for (const auto& p : params)
            if (p.grad().defined()) norms.push_back(p.grad().norm());
          const double norm = norms.empty() ? 0.0 : torch::stack(norms).norm().item<double>();
          terms.push_back({"grad_norm/" + child.key(), norm});
        }
      }
      if (grad_clip > 0) torch::nn::utils::clip_grad_norm_(ex_.model->parameters(), grad_clip);
      optimizer.step();

      // ---- bookkeeping
      ++step;
      images += B;
      const double loss_value = loss.item<double>();
      if (!std::isfinite(loss_value)) throw Error("training diverged: loss is " + std::to_string(loss_value) + " at step " + std::to_string(step));
      epoch_loss += loss_value;
      ++epoch_batches;
      running_loss = step == 1 ? loss_value : 0.9 * running_loss + 0.1 * loss_value;
      const double step_ips = B / std::max(1e-9, seconds_since(step_t0));
      images_per_s = step == 1 ? step_ips : 0.9 * images_per_s + 0.1 * step_ips;
      if (log_now) {
        terms.push_back({"loss", loss_value});
        terms.push_back({"rho", rho});
        terms.push_back({"depth", static_cast<double>(depth)});
        terms.push_back({"images_per_s", images_per_s});
        terms.push_back({"lr", lr});
        store_.log_metrics(run_id_, step, epoch, "train", terms);
        progress(epoch, step, total_steps, running_loss, rho, depth, images_per_s,
                 seconds_since(t0), step == total_steps);
      }
      if (eval_every > 0 && step % eval_every == 0 && step != total_steps) log_eval(step, epoch);
    }
    // ---- end of epoch: evaluation at the full schedule, checkpoint
    store_.log_metrics(run_id_, step, epoch, "train",
                       {{"epoch_loss", epoch_loss / std::max<int64_t>(1, epoch_batches)}});
    if (!(eval_every > 0 && step % eval_every == 0 && step != total_steps)) log_eval(step, epoch);
    if (cfg.flag("train.checkpoint")) save_checkpoint(step);
  }
  log_policy_spread(step, epochs - 1);
  save_pictures(step, "final");
  summary.steps = step;
  summary.seconds = seconds_since(t0);
  summary.images_per_s = images / std::max(1e-9, summary.seconds);
  return summary;
}

}  // namespace htm
