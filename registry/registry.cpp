#include "registry.h"

#include "config/search_path.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#define BOOST_DLL_USE_STD_FS
#include <boost/dll/shared_library.hpp>

#include "board/run_board.h"
#include "file_checks.h"
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
    const bool folder = fs::is_directory(dir, ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
      warnings_.push_back("plugin folder '" + dir + "' skipped: " + ec.message());
    if (!folder) continue;
    std::vector<fs::path> files;
    fs::directory_iterator it(dir, ec), end;
    if (ec) warnings_.push_back("plugin folder '" + dir + "' skipped: " + ec.message());
    for (; !ec && it != end; it.increment(ec)) {
      if (!is_plugin_file(it->path())) continue;
      std::error_code entry_ec;
      const bool regular = it->is_regular_file(entry_ec);  // follows links: a loop is an error here
      if (entry_ec)
        warnings_.push_back("'" + it->path().string() + "' skipped: " + entry_ec.message());
      else if (regular)
        files.push_back(it->path());
    }
    if (ec) warnings_.push_back("plugin folder '" + dir + "' not read to its end: " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      try {
        PluginEntry entry = load(file.string());
        if (const Manifest* earlier = find(entry.manifest.kind, entry.manifest.name)) {
          const std::string& first = this->entry(earlier->kind, earlier->name).path;
          warnings_.push_back(std::string(kind_name(entry.manifest.kind)) + " plugin '" + entry.manifest.name +
                              "' in '" + first + "' shadows the one in '" + file.string() + "'");
          continue;
        }
        entries_.push_back(std::move(entry));
      } catch (const Error& e) {
        rejected_.push_back(e.what());
      }
    }
  }
  std::sort(entries_.begin(), entries_.end(), [](const PluginEntry& a, const PluginEntry& b) {
    return std::make_pair(a.manifest.kind, a.manifest.name) < std::make_pair(b.manifest.kind, b.manifest.name);
  });
}

Registry::~Registry() = default;

PluginEntry Registry::load(const std::string& path) {
  // The loader maps a truncated file and dies of SIGBUS on touching it: look before loading.
  const std::string problem = elf_problem(path);
  if (!problem.empty()) throw Error("cannot load plugin '" + path + "': " + problem);
  auto library = std::make_shared<boost::dll::shared_library>();
  boost::dll::fs::error_code ec;
  dlerror();
  library->load(path, boost::dll::load_mode::rtld_lazy | boost::dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* loader = dlerror();  // the loader's own words say more than the error code
    throw Error("cannot load plugin '" + path + "': " + (loader ? std::string(loader) : ec.message()));
  }
  if (!library->has("htm_plugin_abi_version") || !library->has("htm_plugin_manifest") ||
      !library->has("htm_plugin_create"))
    throw Error("'" + path + "' is not an htm plugin (it lacks the htm_plugin_* entry points)");
  const int abi = library->get<AbiFn>("htm_plugin_abi_version")();
  if (abi != kSdkAbiVersion)
    throw Error("plugin '" + path + "' was built for htm SDK ABI " + std::to_string(abi) + ", but this htm uses ABI " +
                std::to_string(kSdkAbiVersion) + "; rebuild it against the installed SDK");
  // Every plugin of this major exports its minor (HTM_REGISTER_PLUGIN).
  const int minor = library->has("htm_plugin_abi_minor") ? library->get<AbiFn>("htm_plugin_abi_minor")() : -1;
  const std::string ours = std::to_string(kSdkAbiVersion) + "." + std::to_string(kSdkAbiMinor);
  if (minor < 0)
    throw Error("plugin '" + path + "' says SDK ABI " + std::to_string(abi) +
                " but exports no htm_plugin_abi_minor(); rebuild it with HTM_REGISTER_PLUGIN against SDK " + ours);
  if (minor > kSdkAbiMinor)
    throw Error("plugin '" + path + "' was built on htm SDK " + std::to_string(abi) + "." + std::to_string(minor) +
                " headers, newer than this htm's SDK " + ours +
                ", and may call what this htm lacks; rebuild it against SDK " + ours + " or update htm");
  PluginEntry entry;
  entry.manifest = *library->get<ManifestFn>("htm_plugin_manifest")();
  if (entry.manifest.abi != kSdkAbiVersion)
    throw Error("plugin '" + path + "' declares SDK ABI " + std::to_string(entry.manifest.abi) +
                " in its manifest, but this htm uses ABI " + std::to_string(kSdkAbiVersion) +
                "; rebuild it against the installed SDK");
  entry.path = path;
  entry.library = std::move(library);
  return entry;
}

const PluginEntry& Registry::entry(PluginKind kind, const std::string& name) const {
  for (const auto& e : entries_)
    if (e.manifest.kind == kind && e.manifest.name == name) return e;
  std::string known;
  for (const auto& n : names(kind)) known += (known.empty() ? "" : ", ") + n;
  const std::string refused = why_missing(kind, name);
  if (!refused.empty())
    throw Error(std::string(kind_name(kind)) + " plugin '" + name + "' was found but not loaded: " + refused);
  throw Error(std::string("unknown ") + kind_name(kind) + " plugin '" + name +
              "'; known: " + (known.empty() ? "none" : known));
}

std::string Registry::why_missing(PluginKind kind, const std::string& name) const {
  const std::string file = "/htm_" + std::string(kind_name(kind)) + "_" + name + ".so'";  // as messages quote it
  for (const auto& reason : rejected_)
    if (reason.find(file) != std::string::npos) return reason;
  return "";
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
  int previous = -1;  // a supervised run's board names this plugin while its constructor runs
  const int slot = board_building(kind, name, e.manifest.version, e.path, &previous);
  try {
    raw = create(params, ctx);
  } catch (const Error&) {
    board_built(slot, nullptr, previous);
    throw;  // already a sentence about the input
  } catch (const std::exception& err) {
    board_built(slot, nullptr, previous);
    throw Error(std::string(kind_name(kind)) + " plugin '" + name + "' failed to build: " + err.what());
  }
  board_built(slot, dynamic_cast<const void*>(raw), previous);
  built_.push_back({dynamic_cast<const void*>(raw), kind, name});
  return std::shared_ptr<Plugin>(raw, [library = e.library](Plugin* p) { delete p; });
}

std::string Registry::describe(const void* object) const {
  for (auto it = built_.rbegin(); it != built_.rend(); ++it) {
    if (it->object != object) continue;
    const PluginEntry& e = entry(it->kind, it->name);
    return std::string(kind_name(it->kind)) + " plugin '" + it->name + "' " + e.manifest.version + " (" + e.path + ")";
  }
  return "a plugin";
}

std::string Registry::sha256(const std::string& path) const {
  auto found = sha256_.find(path);
  if (found == sha256_.end()) found = sha256_.emplace(path, sha256_file(path)).first;
  return found->second;
}

}  // namespace htm
