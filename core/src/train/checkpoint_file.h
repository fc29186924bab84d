// Where a run's checkpoint lives in its artifact folder, and which archive in it is the resume
// state: for the trainer that writes it (artifacts.cpp) and the commands that read it (htm
// sample, htm export --format weights). No libtorch header.
#pragma once

#include <cstdint>
#include <string>

#include "htm/error.h"
#include "store/artifact_trust.h"

namespace htm {

/// The trainer's checkpoint in `artifact_dir`: the last one it wrote (a torch OutputArchive).
inline std::string checkpoint_file(const std::string& artifact_dir) { return artifact_dir + "/checkpoint.pt"; }

/// Run `run_id`'s checkpoint for a command to read, from the folder its row names (`status`: the
/// row's, for the message), or htm::Error saying why not: a folder htm did not write here
/// (ArtifactTrust), or no checkpoint in it.
inline std::string readable_checkpoint(int64_t run_id, const std::string& artifact_dir, const std::string& status) {
  const ArtifactPath folder = ArtifactTrust().folder(run_id, artifact_dir);
  if (folder.verdict == ArtifactPath::Verdict::untrusted) throw Error(folder.refusal + "; not read");
  const ArtifactPath checkpoint = ArtifactTrust::recorded_file(folder, checkpoint_file(artifact_dir));
  if (!checkpoint)
    throw Error("run " + std::to_string(run_id) + " has no checkpoint at '" + checkpoint_file(artifact_dir) +
                "' (status " + status + "; was it run with train.checkpoint = false?)");
  return checkpoint.path;
}

/// The checkpoint's archive holding what a resume needs besides the weights (optimiser moments,
/// random generators, step): `htm_resume.*` when Python's torch.jit.load opens the file.
inline constexpr const char* kResumeState = "htm_resume";

}  // namespace htm
