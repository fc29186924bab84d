#include "registry.h"

#include "config/search_path.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include "htm/error.h"

namespace fs = std::filesystem;

namespace htm {
namespace {

using AbiFn = int();
using ManifestFn = const Manifest*();
using CreateFn = Plugin*(const Params&, const BuildContext&);

bool is_plugin_file(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.rfind("htm_", 0) == 0 && p.extension() == ".so";
}

}  // namespace

std::vector<std::string> Registry::default_search_path() {
  return htm::search_path("HTM_PLUGIN_PATH", {HTM_BUILD_PLUGIN_DIR, HTM_INSTALL_PLUGIN_DIR});
}

Registry::Registry(const std::vector<std::string>& search_path) : search_path_(search_path) {
  for (const auto& dir : search_path_) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && is_plugin_file(e.path())) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      try {
        PluginEntry entry = load(file.string());
        if (find(entry.manifest.kind, entry.manifest.name) != nullptr) continue;  // shadowed
        entries_.push_back(std::move(entry));
      } catch (const Error& e) {
        rejected_.push_back(e.what());
      }
    }
  }
  std::sort(entries_.begin(), entries_.end(), [](const PluginEntry& a, const PluginEntry& b) {
    return std::make_pair(a.manifest.kind, a.manifest.name) <
           std::make_pair(b.manifest.kind, b.manifest.name);
  });
}

Registry::~Registry() = default;

PluginEntry Registry::load(const std::string& path) {
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  library->load(path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, ec);
  if (ec) throw Error("cannot load plugin '" + path + "': " + ec.message());
  if (!library->has("htm_plugin_abi_version") || !library->has("htm_plugin_manifest") ||
      !library->has("htm_plugin_create"))
    throw Error("'" + path + "' is not an htm plugin (it lacks the htm_plugin_* entry points)");
  const int abi = library->get<AbiFn>("htm_plugin_abi_version")();
  if (abi != kSdkAbiVersion)
    throw Error("plugin '" + path + "' was built for htm SDK ABI " + std::to_string(abi) +
                ", but this htm uses ABI " + std::to_string(kSdkAbiVersion) +
                "; rebuild it against the installed SDK");
  PluginEntry entry;
  entry.manifest = *library->get<ManifestFn>("htm_plugin_manifest")();
  entry.path = path;
  entry.library = std::move(library);
  return entry;
}

const PluginEntry& Registry::entry(PluginKind kind, const std::string& name) const {
  for (const auto& e : entries_)
    if (e.manifest.kind == kind && e.manifest.name == name) return e;
  std::string known;
  for (const auto& n : names(kind)) known += (known.empty() ? "" : ", ") + n;
  throw Error(std::string("unknown ") + kind_name(kind) + " plugin '" + name + "'; known: " +
              (known.empty() ? "none" : known));
}

Params Registry::default_params(PluginKind kind, const std::string& name) const {
  Params params;
  for (const auto& spec : entry(kind, name).manifest.params) params.set(spec.name, spec.default_value);
  return params;
}

const Manifest* Registry::find(PluginKind kind, const std::string& name) const {
  for (const auto& e : entries_)
    if (e.manifest.kind == kind && e.manifest.name == name) return &e.manifest;
  return nullptr;
}

std::vector<std::string> Registry::names(PluginKind kind) const {
  std::vector<std::string> out;
  for (const auto& e : entries_)
    if (e.manifest.kind == kind) out.push_back(e.manifest.name);
  return out;
}

std::shared_ptr<Plugin> Registry::build(PluginKind kind, const std::string& name, const Params& params,
                                        const BuildContext& ctx) const {
  const PluginEntry& e = entry(kind, name);
  auto create = e.library->get<CreateFn>("htm_plugin_create");
  Plugin* raw = nullptr;
  try {
    raw = create(params, ctx);
  } catch (const Error&) {
    throw;  // already a sentence about the input
  } catch (const std::exception& err) {
    throw Error(std::string(kind_name(kind)) + " plugin '" + name + "' failed to build: " + err.what());
  }
  return std::shared_ptr<Plugin>(raw, [library = e.library](Plugin* p) { delete p; });
}

}  // namespace htm
