// A merge policy written in Python: a module scripted with torch.jit.script and saved with
// torch.jit.save, whose forward(tokens, depth) gives the B×T×T pair logits (and, optionally,
// unmerge_scores(tokens, depth) the B×T unmerge scores). The scripted module's parameters and
// buffers are registered as this policy's own, under their Python names, so the optimiser,
// checkpoints and resume, runtime.device, the data-parallel reducer and the memory estimate see
// them as any plugin's; sampling, exact log-probabilities and entropy stay in the SDK and draw
// from the run's generator.
#include <torch/script.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "htm/error.h"
#include "htm/layers.h"
#include "htm/policy.h"

namespace {

constexpr const char* kForward = "forward(self, tokens: Tensor, depth: int) -> Tensor";
constexpr const char* kUnmerge = "unmerge_scores(self, tokens: Tensor, depth: int) -> Tensor";

htm::Manifest manifest() {
  using htm::ValueType;
  return {"torchscript",
          htm::PluginKind::policy,
          "1.0.0",
          htm::kSdkAbiVersion,
          "A merge policy written in PyTorch: a torch.jit.script module (file `path`) whose forward(tokens, depth) "
          "gives the B x T x T pair logits; sampling, log-probabilities and entropy stay in C++",
          {{"path", ValueType::string, std::string(),
            "the module saved by torch.jit.script(m).save(path) (docs/examples/python_policy/)"},
           {"score_hidden", ValueType::integer, int64_t{0},
            "hidden width of the C++ unmerge scoring MLP, used when the module has no unmerge_scores; 0 = the "
            "model's width"}}};
}

// What a libtorch or TorchScript error says, in one line: its last non-empty line, without C++
// frames (the interpreter puts the Python traceback first and the error itself last).
std::string last_line(const std::exception& e) {
  const auto* error = dynamic_cast<const c10::Error*>(&e);
  std::string text = error ? error->what_without_backtrace() : e.what();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

// A torch.jit.save file, or one clear line saying why the file is not one.
torch::jit::Module load_scripted(const std::string& path) {
  const std::string where = "torchscript: " + path + ": ";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw htm::Error(where + "no such file (save one with torch.jit.script(module).save(path))");
  try {
    return torch::jit::load(path);
  } catch (const c10::Error& e) {
    const std::string text = e.what_without_backtrace();
    const size_t at = text.find("Attempted to read a PyTorch file with version");
    if (at != std::string::npos)
      throw htm::Error(where + "saved by a newer torch than the libtorch htm links (" TORCH_VERSION "): " +
                       text.substr(at, text.find(". ", at) + 1 - at) + " Save it with torch " TORCH_VERSION ".");
    throw htm::Error(where +
                     "not a TorchScript module (save it with torch.jit.script(module).save(path); "
                     "torch.save of a module or state_dict is not one): " +
                     last_line(e));
  }
}

// Whether the module has `name` with the signature (self, Tensor, int) -> Tensor; a method of that
// name with another signature is an error.
bool has_method(const torch::jit::Module& module, const std::string& name, const char* expected,
                const std::string& path) {
  auto method = module.find_method(name);
  if (!method) return false;
  const c10::FunctionSchema& schema = method->function().getSchema();
  const auto& args = schema.arguments();
  const bool ok = args.size() == 3 && args[1].type()->kind() == c10::TypeKind::TensorType &&
                  args[2].type()->kind() == c10::TypeKind::IntType && schema.returns().size() == 1 &&
                  schema.returns()[0].type()->kind() == c10::TypeKind::TensorType;
  if (ok) return true;
  std::ostringstream found;
  found << schema;
  throw htm::Error("torchscript: " + path + ": " + name + " must be " + expected + "; the module's is " + found.str());
}

class TorchScriptPolicy : public htm::Policy {
 public:
  TorchScriptPolicy(const htm::Params& params, const htm::BuildContext& ctx) : path_(params.text("path")) {
    if (path_.empty())
      throw htm::Error(
          "torchscript: set policy.path to a module saved by torch.jit.script(module).save(path) "
          "(docs/examples/python_policy/)");
    module_ = load_scripted(path_);
    if (!has_method(module_, "forward", kForward, path_))
      throw htm::Error("torchscript: " + path_ + ": the module has no " + kForward);
    scores_unmerges_ = has_method(module_, "unmerge_scores", kUnmerge, path_);
    for (const auto& p : module_.named_parameters(/*recurse=*/true))
      owner(p.name).register_parameter(leaf(p.name), p.value, p.value.requires_grad());
    for (const auto& b : module_.named_buffers(/*recurse=*/true)) owner(b.name).register_buffer(leaf(b.name), b.value);
    if (!scores_unmerges_) {
      if (module_.hasattr("unmerge"))
        throw htm::Error("torchscript: " + path_ +
                         ": the module has an attribute `unmerge` but no unmerge_scores; htm's unmerge scorer "
                         "needs that name (rename it, or define " +
                         kUnmerge + ")");
      const int64_t hidden = params.integer("score_hidden") > 0 ? params.integer("score_hidden") : ctx.dim;
      unmerge_ = register_module("unmerge", htm::UnmergeScorer(ctx.dim, hidden));
    }
    // A dry run on zeros, so a module built for another width fails here with one line, not
    // inside the first training step.
    torch::NoGradGuard no_grad;
    const int64_t dim = ctx.dim > 0 ? ctx.dim : 1;
    logits_of(torch::zeros({1, 4, dim}), 1);
    if (scores_unmerges_) unmerge_scores_of(torch::zeros({1, 4, dim}), 1);
  }

  void train(bool on) override {
    torch::nn::Module::train(on);
    module_.train(on);
  }

  htm::MergeDecision choose_merges(const htm::MergeContext& ctx) override {
    auto logits = merge_logits(ctx);
    auto [src, dst] = htm::sample_disjoint_pairs(logits, ctx.r, ctx.generator, ctx.logit_bound);
    return {src, dst, htm::pair_log_prob(logits, src, dst, ctx.log_prob_form, ctx.logit_bound),
            htm::pair_entropy(logits, ctx.logit_bound)};
  }

  htm::UnmergeDecision choose_unmerges(const htm::UnmergeContext& ctx) override {
    if (!scores_unmerges_) return unmerge_->choose(ctx);
    auto scores = unmerge_scores_of(ctx.tokens.detach(), ctx.depth);
    // Teacher forcing: the true tokens' log-probabilities under the softmax over all T, as
    // htm::UnmergeScorer gives them.
    if (ctx.forced.defined()) return {ctx.forced, torch::log_softmax(scores, 1).gather(1, ctx.forced)};
    auto index = htm::sample_without_replacement(scores, ctx.r, ctx.generator);
    return {index, htm::token_log_prob(scores, index, ctx.log_prob_form)};
  }

  torch::Tensor merge_logits(const htm::MergeContext& ctx) override {
    return logits_of(ctx.tokens.detach(), ctx.depth);
  }

 private:
  // The nn::Module that holds the scripted attribute `name` ("a.b.weight": child a, its child b),
  // made as the names are read, so the policy's parameters keep their Python names.
  torch::nn::Module& owner(const std::string& name) {
    torch::nn::Module* module = this;
    size_t start = 0;
    for (size_t dot = name.find('.'); dot != std::string::npos; start = dot + 1, dot = name.find('.', start)) {
      const std::string prefix = name.substr(0, dot);
      auto& child = children_[prefix];
      if (!child)
        child = module->register_module(name.substr(start, dot - start), std::make_shared<torch::nn::Module>());
      module = child.get();
    }
    return *module;
  }
  static std::string leaf(const std::string& name) { return name.substr(name.rfind('.') + 1); }

  torch::Tensor call(const std::string& method, const torch::Tensor& tokens, int64_t depth) {
    c10::IValue out;
    try {
      out = module_.get_method(method)({tokens, depth});
    } catch (const std::exception& e) {
      throw htm::Error("torchscript: " + path_ + ": " + method + " failed on tokens of shape " + shape(tokens) + ": " +
                       last_line(e));
    }
    return out.toTensor();
  }

  torch::Tensor logits_of(const torch::Tensor& tokens, int64_t depth) {
    auto logits = call("forward", tokens, depth);
    const int64_t B = tokens.size(0), T = tokens.size(1);
    if (logits.dim() != 3 || logits.size(0) != B || logits.size(1) != T || logits.size(2) != T)
      throw htm::Error("torchscript: " + path_ + ": forward returned " + shape(logits) + " for tokens of shape " +
                       shape(tokens) + "; expected the pair logits B x T x T = [" + std::to_string(B) + ", " +
                       std::to_string(T) + ", " + std::to_string(T) + "]");
    return logits;
  }

  torch::Tensor unmerge_scores_of(const torch::Tensor& tokens, int64_t depth) {
    auto scores = call("unmerge_scores", tokens, depth);
    const int64_t B = tokens.size(0), T = tokens.size(1);
    if (scores.dim() != 2 || scores.size(0) != B || scores.size(1) != T)
      throw htm::Error("torchscript: " + path_ + ": unmerge_scores returned " + shape(scores) +
                       " for tokens of shape " + shape(tokens) + "; expected B x T = [" + std::to_string(B) + ", " +
                       std::to_string(T) + "]");
    return scores;
  }

  static std::string shape(const torch::Tensor& t) {
    std::ostringstream out;
    out << t.sizes();
    return out.str();
  }

  std::string path_;
  torch::jit::Module module_;
  bool scores_unmerges_ = false;
  std::map<std::string, std::shared_ptr<torch::nn::Module>> children_;
  htm::UnmergeScorer unmerge_{nullptr};
};

}  // namespace

HTM_REGISTER_PLUGIN(TorchScriptPolicy, manifest)
