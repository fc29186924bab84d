// Which files named by a results database htm reads or writes. A database names each run's
// artifact folder (runs.artifact_dir) and its files (artifacts.path), and whoever hands over a
// database names what they like: htm merge copies another machine's rows as written. So the
// database says which folder, and the file system says whether htm wrote it here: htm run puts a
// marker file in the folder it writes runs under (runtime.artifacts), and a run's folder is
// trusted only at or under a folder holding that marker (a regular file owned by this user), or
// under a root the user named on the command line (--artifacts). Every reader goes through
// ArtifactTrust: htm serve's /artifact/ route and lists, htm report's pictures, htm sample, the
// weights export, and a resumed claim (claims.cpp). docs/reliability.md states the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace htm {

/// The marker's file name, in a folder htm run writes runs under.
inline constexpr const char* kArtifactsMarker = ".htm-artifacts";

/// Puts the marker in `root` (made if absent) unless one is there. Throws htm::Error when it
/// cannot, when what is there is no marker (a link, another user's file), or when `root` is the
/// file system's root or the home folder: everything under a marker may be served.
void mark_artifacts_root(const std::string& root);

/// A folder or file the checks accepted, or why not.
struct ArtifactPath {
  enum class Verdict {
    accepted,
    absent,     ///< no folder, or no such file in it (a name with "..", a link out: not in it either)
    untrusted,  ///< a folder that is neither marked nor under a root given
  };
  Verdict verdict = Verdict::accepted;
  int64_t run_id = 0;
  std::string path;     ///< canonical (links resolved); empty when refused
  std::string refusal;  ///< one line naming the run and the path; empty when accepted
  explicit operator bool() const { return verdict == Verdict::accepted; }
};

class ArtifactTrust {
 public:
  /// `roots`: folders trusted besides the marked ones (a command's --artifacts). Throws
  /// htm::Error naming one that is not a folder.
  explicit ArtifactTrust(const std::vector<std::string>& roots = {});

  /// Run `run_id`'s artifact folder as the database names it (relative: to the working folder):
  /// accepted when it is a folder that, links resolved, lies at or under a marked folder or a root.
  ArtifactPath folder(int64_t run_id, const std::string& dir) const;
  /// The folder of a run about to be resumed, which writes there: as folder(), but one not made
  /// yet (the run stopped before making it) is accepted when its nearest existing parent is and
  /// the missing rest names no "..".
  ArtifactPath resumable_folder(int64_t run_id, const std::string& dir) const;

  /// The regular file `name` in an accepted folder: a relative name without "..", which resolves,
  /// links too, to a file inside it (htm serve's /artifact/RUN/NAME).
  static ArtifactPath file(const ArtifactPath& folder, const std::string& name);
  /// folder() then file(): the one check of a file the database's folder holds.
  ArtifactPath file(int64_t run_id, const std::string& dir, const std::string& name) const {
    return file(folder(run_id, dir), name);
  }
  /// A path as the database recorded it (artifacts.path: absolute, or relative to the working
  /// folder) that resolves to a regular file inside an accepted folder.
  static ArtifactPath recorded_file(const ArtifactPath& folder, const std::string& path);

 private:
  ArtifactPath accept(int64_t run_id, const std::string& dir, const std::string& canonical) const;
  std::vector<std::string> roots_;  ///< canonical
};

}  // namespace htm
