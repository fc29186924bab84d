// The artifact trust checks (artifact_trust.h): folders canonicalised, then accepted under a
// marker that lstat sees as this user's regular file, or under a root given on the command line.
#include "store/artifact_trust.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "htm/error.h"

namespace htm {
namespace fs = std::filesystem;
namespace {

// A marker counts only as a regular file of this user's: a link could point anywhere, and a file
// another user left would let them choose what this user's htm serves.
bool is_marker(const fs::path& file) {
  struct stat st {};
  return lstat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
}

bool marked(const fs::path& canonical) {
  for (fs::path at = canonical;; at = at.parent_path()) {
    if (is_marker(at / kArtifactsMarker)) return true;
    if (at == at.parent_path()) return false;
  }
}

// Both canonical: `path` is `root` or lies under it.
bool under(const fs::path& path, const fs::path& root) {
  const fs::path inside = path.lexically_relative(root);
  return !inside.empty() && *inside.begin() != "..";
}

bool names_parent(const fs::path& path) {
  for (const auto& part : path)
    if (part == "..") return true;
  return false;
}

std::string whose(int64_t run_id) { return "run " + std::to_string(run_id) + "'s artifact folder"; }

using Verdict = ArtifactPath::Verdict;

ArtifactPath refused(int64_t run_id, std::string why, Verdict verdict = Verdict::absent) {
  return {verdict, run_id, "", std::move(why)};
}

std::string marker_text() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  return std::string("written by htm run; folders under here are served by htm serve and read by htm report, ") +
         "htm sample and htm export (docs/reliability.md)\nhost " + host + ", " + stamp + "\n";
}

}  // namespace

void mark_artifacts_root(const std::string& root) {
  const fs::path marker = fs::path(root) / kArtifactsMarker;
  if (is_marker(marker)) return;
  std::error_code ec;
  fs::create_directories(root, ec);
  const fs::path canonical = fs::canonical(root, ec);
  if (ec) throw Error("cannot make the artifacts folder '" + root + "': " + ec.message());
  const char* home = std::getenv("HOME");
  if (canonical == canonical.root_path() || (home != nullptr && *home && canonical == fs::canonical(home, ec)))
    throw Error("runtime.artifacts '" + root + "' is " + canonical.string() +
                ": htm serve would serve every file under it; give runs a folder of their own");
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST && is_marker(marker)) return;  // another process of this study made it
  if (fd < 0 && errno == EEXIST)
    throw Error("'" + marker.string() + "' is not a marker htm wrote (a link, or another user's file): remove it");
  if (fd < 0) throw Error("cannot write '" + marker.string() + "': " + std::strerror(errno));
  const std::string text = marker_text();
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!written) throw Error("cannot write '" + marker.string() + "'");
}

ArtifactTrust::ArtifactTrust(const std::vector<std::string>& roots) {
  for (const std::string& root : roots) {
    std::error_code ec;
    const fs::path canonical = fs::canonical(root, ec);
    if (ec || !fs::is_directory(canonical, ec)) throw Error("--artifacts " + root + ": no such folder");
    roots_.push_back(canonical.string());
  }
}

ArtifactPath ArtifactTrust::accept(int64_t run_id, const std::string& dir, const std::string& canonical) const {
  bool trusted = marked(canonical);
  for (const std::string& root : roots_) trusted = trusted || under(canonical, root);
  if (trusted) return {Verdict::accepted, run_id, canonical, ""};
  const std::string shown = canonical == dir ? "'" + dir + "'" : "'" + dir + "' (" + canonical + ")";
  return refused(run_id,
                 whose(run_id) + " " + shown + " is not under a folder htm run wrote on this machine (no " +
                     kArtifactsMarker + " marker above it)" +
                     (roots_.empty() ? "" : " nor under a root given with --artifacts"),
                 Verdict::untrusted);
}

ArtifactPath ArtifactTrust::folder(int64_t run_id, const std::string& dir) const {
  if (dir.empty()) return refused(run_id, "run " + std::to_string(run_id) + " has no artifact folder");
  std::error_code ec;
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec) return refused(run_id, whose(run_id) + " '" + dir + "' does not exist here");
  if (!fs::is_directory(canonical, ec)) return refused(run_id, whose(run_id) + " '" + dir + "' is not a folder");
  return accept(run_id, dir, canonical.string());
}

ArtifactPath ArtifactTrust::resumable_folder(int64_t run_id, const std::string& dir) const {
  std::error_code ec;
  if (dir.empty() || fs::exists(fs::symlink_status(dir, ec))) return folder(run_id, dir);
  if (names_parent(dir))
    return refused(run_id, whose(run_id) + " '" + dir + "' does not exist and names '..'", Verdict::untrusted);
  fs::path made = fs::absolute(dir, ec).lexically_normal(), missing;
  while (!fs::exists(fs::symlink_status(made, ec)) && made != made.parent_path()) {
    missing = made.filename() / missing;
    made = made.parent_path();
  }
  const fs::path parent = fs::canonical(made, ec);
  if (ec || !fs::is_directory(parent, ec)) return refused(run_id, whose(run_id) + " '" + dir + "' cannot be made");
  std::string would_be = (parent / missing).lexically_normal().string();
  if (would_be.size() > 1 && would_be.back() == '/') would_be.pop_back();
  return accept(run_id, dir, would_be);  // the marker is looked for from the nearest parent up
}

ArtifactPath ArtifactTrust::file(const ArtifactPath& folder, const std::string& name) {
  if (!folder) return folder;
  const fs::path wanted(name);
  if (name.empty() || wanted.is_absolute() || names_parent(wanted))
    return refused(folder.run_id, "'" + name + "' is not a name inside " + whose(folder.run_id));
  std::error_code ec;
  const fs::path file = fs::canonical(fs::path(folder.path) / wanted, ec);  // a link out is refused below
  if (ec || !fs::is_regular_file(file, ec))
    return refused(folder.run_id, whose(folder.run_id) + " has no file '" + name + "'");
  if (!under(file, folder.path)) return refused(folder.run_id, "'" + name + "' leads out of " + whose(folder.run_id));
  return {Verdict::accepted, folder.run_id, file.string(), ""};
}

ArtifactPath ArtifactTrust::recorded_file(const ArtifactPath& folder, const std::string& path) {
  if (!folder) return folder;
  std::error_code ec;
  const fs::path file = fs::canonical(path, ec);
  if (ec || !fs::is_regular_file(file, ec) || !under(file, folder.path))  // absent and elsewhere alike: not there
    return refused(folder.run_id,
                   "run " + std::to_string(folder.run_id) + "'s file '" + path + "' is not in " + whose(folder.run_id));
  return {Verdict::accepted, folder.run_id, file.string(), ""};
}

}  // namespace htm
