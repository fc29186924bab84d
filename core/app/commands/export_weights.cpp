// The weights export: the checkpoint is a TorchScript archive (torch::serialize::OutputArchive);
// its parameters and buffers, less the resume state under `htm_resume`, go into a dict written
// with torch::pickle_save, which Python's torch.load reads.
#include "commands/export_weights.h"

#include <cstdio>
#include <fstream>

#include <torch/script.h>
#include <torch/torch.h>

#include "config/toml_tree.h"
#include "htm/error.h"
#include "train/checkpoint_file.h"

namespace htm {
namespace {

bool is_resume_state(const std::string& name) { return name.rfind(std::string(kResumeState) + ".", 0) == 0; }

// A setting's TOML spelling as a Python value: bool, int, float, str or a list of them; anything
// else (none yet) stays its TOML text.
c10::IValue setting_value(const std::string& key, const std::string& toml) {
  std::optional<Value> value;
  try {
    const config::Node doc = config::parse_toml("v = " + toml, "setting " + key);
    if (const config::Node* leaf = doc.find("v")) value = leaf->value;
  } catch (const Error&) {
  }
  if (!value) return c10::IValue(toml);
  return std::visit(
      [](const auto& v) -> c10::IValue {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return c10::List<int64_t>(v);
        else if constexpr (std::is_same_v<T, std::vector<double>>)
          return c10::List<double>(v);
        else if constexpr (std::is_same_v<T, std::vector<std::string>>)
          return c10::List<std::string>(v);
        else
          return c10::IValue(v);
      },
      *value);
}

}  // namespace

WeightsWritten write_weights(const WeightsExport& what, const std::string& out) {
  torch::jit::Module checkpoint;
  try {
    checkpoint = torch::jit::load(what.checkpoint, torch::kCPU);  // host: a file any torch.load opens
  } catch (const c10::Error& e) {
    throw Error("cannot read the checkpoint '" + what.checkpoint + "': " + e.what_without_backtrace());
  }
  WeightsWritten written;
  c10::Dict<std::string, at::Tensor> parameters, buffers;
  for (const auto& p : checkpoint.named_parameters(/*recurse=*/true)) {
    if (p.name == std::string(kResumeState) + ".step") written.step = p.value.item<int64_t>();
    if (!is_resume_state(p.name)) parameters.insert(p.name, p.value.detach());
  }
  for (const auto& b : checkpoint.named_buffers(/*recurse=*/true))
    if (!is_resume_state(b.name)) buffers.insert(b.name, b.value.detach());
  written.parameters = parameters.size();
  written.buffers = buffers.size();

  c10::impl::GenericDict settings(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [key, toml] : what.settings) settings.insert(key, setting_value(key, toml));
  c10::impl::GenericDict run(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [key, value] : what.run)
    run.insert(key, std::visit([](const auto& v) { return c10::IValue(v); }, value));
  run.insert("checkpoint", what.checkpoint);
  run.insert("step", written.step);

  c10::impl::GenericDict file(c10::StringType::get(), c10::AnyType::get());
  file.insert("parameters", parameters);
  file.insert("buffers", buffers);
  file.insert("settings", settings);
  file.insert("run", run);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(file));
  const std::string tmp = out + ".tmp";
  {
    std::ofstream stream(tmp, std::ios::binary | std::ios::trunc);
    stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    stream.close();
    if (!stream) {
      std::remove(tmp.c_str());
      throw Error("cannot write '" + out + "'");
    }
  }
  if (std::rename(tmp.c_str(), out.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("cannot write '" + out + "'");
  }
  return written;
}

}  // namespace htm
