// Evaluation at the full schedule, with the hierarchy scores and their references where the
// data knows its true trees, and the policy's spread across inputs (Figure 4).
#include <cmath>
#include <map>
#include <random>

#include <torch/torch.h>

#include "board/plugin_scope.h"
#include "hierarchy/policy_metrics.h"
#include "hierarchy/tree_scoring.h"
#include "kernels/graph_draws.h"
#include "train/eval_graph.h"
#include "train/trainer.h"

namespace htm {

Trainer::Eval Trainer::evaluate() {
  auto* htm_model = dynamic_cast<HtmModelImpl*>(ex_.model.get());
  const bool greedy = htm_model != nullptr && ex_.config.settings.train.eval_greedy;
  struct Greedy {  // sampled merges again however the evaluation ends
    HtmModelImpl* model;
    ~Greedy() {
      if (model != nullptr) model->greedy_merges(false);
    }
  } greedy_off{greedy ? htm_model : nullptr};
  if (greedy) htm_model->greedy_merges(true);
  Eval e = evaluate_once(greedy ? "greedy" : "trained");
  if (e.learned_trees) {
    for (const auto& m : reference_scores(eval_samples_)) e.metrics.push_back(m);
  }
  // A policy's own one-number parameters as they stand (residual's gate g and inverse
  // temperature): what a learned policy changed, read beside what it scored. Its own: not its
  // layers' (recurse = false), and no weight that has one entry only at this size (head_weight
  // at one head).
  for (const auto& child : ex_.model->named_children()) {
    if (child.key() != "policy") continue;
    for (const auto& p : child.value()->named_parameters(/*recurse=*/false)) {
      const std::string& name = p.key();
      const bool a_weight = name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0;
      if (p.value().numel() == 1 && !a_weight)
        e.metrics.push_back(
            {"policy/" + name,
             p.value().detach().to(torch::kCPU, torch::kDouble).item<double>()});  // host: one number a parameter
    }
  }
  if (greedy) {  // the same weights drawing their merges, as without train.eval_greedy
    htm_model->greedy_merges(false);
    append_under("sampled/", evaluate_once("sampled"), e);
    htm_model->greedy_merges(true);
  }
  // The same weights deciding with each of train.eval_policies instead (the "switch").
  for (const auto& [name, policy] : ex_.eval_policies) {
    PolicySwitch under(*htm_model, policy);
    append_under("under/" + name + "/", evaluate_once("under/" + name), e);
  }
  return e;
}

void Trainer::append_under(const std::string& prefix, const Eval& under, Eval& e) {
  if (!std::isnan(under.mse)) e.metrics.push_back({prefix + "mse", under.mse});
  if (!std::isnan(under.accuracy)) e.metrics.push_back({prefix + "accuracy", under.accuracy});
  for (const auto& m : under.metrics) e.metrics.push_back({prefix + m.name, m.value});
}

namespace {

// One evaluation batch's pass, its losses and what the host reads of them, on the device.
EvalBatch eval_pass(Experiment& ex, const Batch& batch, at::Generator generator, ForwardHooks& hooks) {
  EvalBatch e;
  auto out = ex.model->forward(batch.input, ex.schedule, generator, &hooks);
  const auto zero = torch::zeros({}, batch.input.options().dtype(torch::kDouble));
  std::vector<torch::Tensor> reads{zero, zero};
  if (out.output.sizes() == batch.input.sizes()) {
    reads[0] = ex.model->reconstruction_error(out.output, batch.input).sum();
    e.reconstructed = true;
  } else if (out.output.dim() == 2 && batch.labels.defined()) {
    reads[0] = (out.output.argmax(1) == batch.labels).sum();
    e.classified = true;
  }
  if (out.leaf_loss.defined()) reads[1] = out.leaf_accuracy, e.leaf = true;
  std::vector<PendingMetric> terms;
  training_objective(ex.losses, out, batch, 0, 0, false, false, &terms);
  if (out.leaf_loss.defined()) terms.push_back({"loss/leaf_classifier", out.leaf_loss.mean()});
  for (const auto& t : terms) reads.push_back(t.value), e.terms.push_back(t.name);
  for (auto& r : reads) r = r.to(torch::kDouble).reshape({});
  e.reads = torch::stack(reads);
  if (batch.tree.defined()) e.merges = out.merges;
  return e;
}

}  // namespace

Trainer::Eval Trainer::evaluate_once(const std::string& policy) {
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  const int64_t n = eval_samples_;
  const int64_t bs = ex_.config.settings.train.eval_batch_size;
  // A fixed generator: the same model evaluates to the same number (with runtime.cuda_graph, on
  // the same device: each batch's draws are seeded from it).
  auto gen = at::make_generator<at::CPUGeneratorImpl>(static_cast<uint64_t>(seed_) + 7919);
  const EvalGraphs::Pass pass = [this, gen](const Batch& batch) {
    ForwardHooks hooks = loss_hooks(ex_.losses, 0, 0, false, generator_);
    hooks.tree = batch.tree;
    return eval_pass(ex_, batch, gen, hooks);
  };
  double error_sum = 0, leaf_hits = 0;
  int64_t reconstructed = 0, correct = 0, labelled = 0;
  std::map<std::string, double> loss_sums;
  TreeScoreMean learned;
  for (int64_t i = 0; i < n; i += bs) {
    // One process stops mid-evaluation; data-parallel ranks stop together at the next step.
    if (options_.comm == nullptr && interrupt_requested()) throw Interrupted();
    Batch batch;
    {
      PluginScope scope(PluginKind::dataset, ex_.dataset.get(), "get");
      batch = on_device(ex_.dataset->get(Split::test, torch::arange(i, std::min(n, i + bs))), ex_.device);
    }
    EvalBatch b;
    if (eval_graphs_) {
      b = eval_graphs_->run(policy, batch, next_seed(gen), pass);
    } else {
      b = pass(batch);
      read_on_host(b);
    }
    const int64_t B = batch.input.size(0);
    const double* v = b.values.data();
    if (b.reconstructed) error_sum += v[0], reconstructed += B;
    if (b.classified) correct += static_cast<int64_t>(v[0]), labelled += B;
    if (b.leaf) leaf_hits += v[1] * static_cast<double>(B);
    for (size_t k = 0; k < b.terms.size(); ++k) loss_sums[b.terms[k]] += v[2 + k] * static_cast<double>(B);
    if (!b.merges.empty()) {
      const auto truth = true_trees(batch.tree);
      const auto predicted = merge_trees(b.merges, batch.input.size(1), batch.input.size(0));
      for (size_t k = 0; k < truth.size(); ++k) learned.add(predicted[k], truth[k]);
    }
  }
  ex_.model->train();
  Eval e;
  e.mse = reconstructed > 0 ? error_sum / static_cast<double>(reconstructed) : std::nan("");
  e.accuracy = labelled > 0 ? static_cast<double>(correct) / static_cast<double>(labelled) : std::nan("");
  for (const auto& [name, sum] : loss_sums) e.metrics.push_back({name, sum / static_cast<double>(n)});
  if (loss_sums.count("loss/leaf_classifier"))
    e.metrics.push_back({"leaf_accuracy", leaf_hits / static_cast<double>(n)});
  if (learned.samples() > 0) {
    for (const auto& m : learned.metrics("")) e.metrics.push_back(m);
    e.learned_trees = true;
  }
  return e;
}

const std::vector<Metric>& Trainer::reference_scores(int64_t n_samples) {
  if (!reference_scores_.empty()) return reference_scores_;
  const Batch batch = ex_.dataset->get(Split::test, torch::arange(n_samples));
  const auto truth = true_trees(batch.tree);
  std::mt19937_64 rng(static_cast<uint64_t>(seed_) + 104729);
  TreeScoreMean random, agglomerative;
  // Tokens wider than points or segments: the similarity rules on the raw tokens, all of them
  // (issue 63's gate: none of them should find a tree that similarity does not show).
  const bool wide = batch.input.size(2) > 4;
  const std::vector<PairRule> rules = {PairRule::farthest, PairRule::cosine, PairRule::anticosine, PairRule::tome};
  std::vector<TreeScoreMean> by_rule(wide ? rules.size() : 0);
  int64_t reachable = 0;
  std::map<std::string, bool> reachable_shape;  // the answer depends on the tree's shape alone
  for (size_t b = 0; b < truth.size(); ++b) {
    random.add(random_merges(truth[b].leaves, ex_.schedule, rng), truth[b]);
    if (wide) {
      const auto features = token_features(batch.input[b]);
      agglomerative.add(rule_merges(features, ex_.schedule, PairRule::closest), truth[b]);
      for (size_t k = 0; k < by_rule.size(); ++k)
        by_rule[k].add(rule_merges(features, ex_.schedule, rules[k]), truth[b]);
    } else {
      agglomerative.add(agglomerative_merges(token_positions(batch.input[b]), ex_.schedule), truth[b]);
    }
    auto [it, fresh] = reachable_shape.try_emplace(shape_code(truth[b]), false);
    if (fresh) it->second = schedule_reaches(truth[b], ex_.schedule);
    reachable += it->second ? 1 : 0;
  }
  const int64_t n = static_cast<int64_t>(truth.size());
  if (reachable < n) {
    std::string schedule;
    for (int64_t r : ex_.schedule) schedule += (schedule.empty() ? "" : ", ") + std::to_string(r);
    std::fprintf(stderr,
                 "[%s] note: the merge schedule [%s] cannot build the true tree of %lld of %lld "
                 "test samples, so no policy can score 1 on them\n",
                 label_.c_str(), schedule.c_str(), static_cast<long long>(n - reachable), static_cast<long long>(n));
  }
  reference_scores_ = random.metrics("random/");
  for (const auto& m : agglomerative.metrics("agglomerative/")) reference_scores_.push_back(m);
  for (size_t k = 0; k < by_rule.size(); ++k)
    for (const auto& m : by_rule[k].metrics(std::string(pair_rule_name(rules[k])) + "/"))
      reference_scores_.push_back(m);
  reference_scores_.push_back({"truth_reachable", static_cast<double>(reachable) / static_cast<double>(n)});
  return reference_scores_;
}

at::Tensor Trainer::first_layer_logits() {
  const int64_t n = std::min<int64_t>(64, ex_.dataset->size(Split::test));
  if (n < 2 || ex_.schedule.empty() || ex_.schedule[0] == 0) return {};
  torch::NoGradGuard no_grad;
  ex_.model->eval();
  const Batch batch = on_device(ex_.dataset->get(Split::test, torch::arange(n)), ex_.device);
  auto logits = ex_.model->first_merge_logits(batch.input, ex_.schedule[0]);
  ex_.model->train();
  return logits;
}

void Trainer::log_policy_spread(int64_t step, int64_t epoch) {
  // Figure 4's question, as two numbers over the first test inputs (see policy_metrics.h).
  const at::Tensor logits = first_layer_logits();
  if (!logits.defined()) return;
  PolicySpread spread = policy_spread(logits);
  // After the last checkpoint: a run killed from here on and resumed logs these again.
  store_.log_metrics(run_id_, step, epoch, "test",
                     {{"policy_variation", spread.variation}, {"policy_structure", spread.structure}},
                     /*replace=*/true);
  save_policy_heatmap(logits, step);
}

}  // namespace htm
