// A module scripted in Python (torch.jit.script, saved by torch.jit.save) adopted by a C++
// plugin: loaded with one clear line for each way a file can be wrong, its parameters and
// buffers registered as the plugin's own under their Python names, its methods checked for the
// signature the plugin calls and called with errors turned into one line. Shared by the
// torchscript policy and the torchscript merge operator (plugins/merge/torchscript).
#pragma once

#include <torch/script.h>
#include <torch/torch.h>

#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "htm/error.h"

namespace htm::scripted {

/// What a libtorch or TorchScript error says, in one line: its last non-empty line, without C++
/// frames (the interpreter puts the Python traceback first and the error itself last).
inline std::string last_line(const std::exception& e) {
  const auto* error = dynamic_cast<const c10::Error*>(&e);
  std::string text = error ? error->what_without_backtrace() : e.what();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

inline std::string shape(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

class Module {
 public:
  /// Loads `path` for the plugin `plugin` (its name starts every message).
  Module(const std::string& plugin, const std::string& path) : where_(plugin + ": " + path + ": ") {
    if (path.empty())
      throw Error(plugin +
                  ": set `path` to a module saved by torch.jit.script(module).save(path) "
                  "(docs/examples/python_policy/)");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      throw Error(where_ + "no such file (save one with torch.jit.script(module).save(path))");
    try {
      module_ = torch::jit::load(path);
    } catch (const c10::Error& e) {
      const std::string text = e.what_without_backtrace();
      const size_t at = text.find("Attempted to read a PyTorch file with version");
      if (at != std::string::npos)
        throw Error(where_ + "saved by a newer torch than the libtorch htm links (" TORCH_VERSION "): " +
                    text.substr(at, text.find(". ", at) + 1 - at) + " Save it with torch " TORCH_VERSION ".");
      throw Error(where_ +
                  "not a TorchScript module (save it with torch.jit.script(module).save(path); "
                  "torch.save of a module or state_dict is not one): " +
                  last_line(e));
    }
  }

  /// Whether the module has method `name` taking `args` (after self) and returning `returns` (a
  /// tuple counted as its elements); a method of that name with another signature is an error
  /// quoting `expected`.
  bool has_method(const std::string& name, const std::string& expected, const std::vector<c10::TypeKind>& args,
                  const std::vector<c10::TypeKind>& returns) const {
    auto method = module_.find_method(name);
    if (!method) return false;
    const c10::FunctionSchema& schema = method->function().getSchema();
    std::vector<c10::TypeKind> takes, gives;
    for (size_t i = 1; i < schema.arguments().size(); ++i) takes.push_back(schema.arguments()[i].type()->kind());
    for (const auto& r : schema.returns()) {
      if (const auto tuple = r.type()->cast<c10::TupleType>())
        for (const auto& element : tuple->elements()) gives.push_back(element->kind());
      else
        gives.push_back(r.type()->kind());
    }
    if (takes == args && gives == returns) return true;
    std::ostringstream found;
    found << schema;
    throw Error(where_ + name + " must be " + expected + "; the module's is " + found.str());
  }

  /// Registers the module's parameters and buffers on `owner` under their Python names ("a.b.w":
  /// child a, its child b, parameter w), so the optimiser, checkpoints, device moves and the
  /// data-parallel reducer see them as the plugin's own.
  void adopt(torch::nn::Module& owner) {
    for (const auto& p : module_.named_parameters(/*recurse=*/true))
      holder(owner, p.name).register_parameter(leaf(p.name), p.value, p.value.requires_grad());
    for (const auto& b : module_.named_buffers(/*recurse=*/true))
      holder(owner, b.name).register_buffer(leaf(b.name), b.value);
  }

  /// Calls `method`; an error inside it becomes one line naming the method and `inputs` (shapes).
  c10::IValue call(const std::string& method, std::vector<c10::IValue> args, const std::string& inputs) {
    try {
      return module_.get_method(method)(std::move(args));
    } catch (const std::exception& e) {
      throw Error(where_ + method + " failed on " + inputs + ": " + last_line(e));
    }
  }

  bool hasattr(const std::string& name) const { return module_.hasattr(name); }
  void train(bool on) { module_.train(on); }
  /// "plugin: path: ", to start a message about this module.
  const std::string& where() const { return where_; }

 private:
  torch::nn::Module& holder(torch::nn::Module& owner, const std::string& name) {
    torch::nn::Module* module = &owner;
    size_t start = 0;
    for (size_t dot = name.find('.'); dot != std::string::npos; start = dot + 1, dot = name.find('.', start)) {
      auto& child = children_[name.substr(0, dot)];
      if (!child)
        child = module->register_module(name.substr(start, dot - start), std::make_shared<torch::nn::Module>());
      module = child.get();
    }
    return *module;
  }
  static std::string leaf(const std::string& name) { return name.substr(name.rfind('.') + 1); }

  std::string where_;
  torch::jit::Module module_;
  std::map<std::string, std::shared_ptr<torch::nn::Module>> children_;
};

}  // namespace htm::scripted
