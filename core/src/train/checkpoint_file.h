// Where a run's checkpoint lives in its artifact folder, and which archive in it is the resume
// state: for the trainer that writes it (artifacts.cpp) and the commands that read it (htm
// sample, htm export --format weights). No libtorch header.
#pragma once

#include <string>

namespace htm {

/// The trainer's checkpoint in `artifact_dir`: the last one it wrote (a torch OutputArchive).
inline std::string checkpoint_file(const std::string& artifact_dir) { return artifact_dir + "/checkpoint.pt"; }

/// The checkpoint's archive holding what a resume needs besides the weights (optimiser moments,
/// random generators, step): `htm_resume.*` when Python's torch.jit.load opens the file.
inline constexpr const char* kResumeState = "htm_resume";

}  // namespace htm
