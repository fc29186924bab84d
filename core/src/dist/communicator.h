// Data-parallel training's processes and their collectives: torch's own c10d engine, a TCPStore
// rendezvous and the Gloo process group, read from torchrun's environment variables so the same
// binary runs under `htm run --nproc`, torchrun-like launchers and `srun`. This header keeps
// c10d and Gloo out of everything that includes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace htm {

/// Where this process stands among the run's processes (torchrun's conventions).
struct WorldInfo {
  int rank = 0;                           ///< RANK: 0 .. world−1; rank 0 alone writes results and files
  int world = 1;                          ///< WORLD_SIZE
  int local_rank = 0;                     ///< LOCAL_RANK: rank among this host's processes
  int local_world = 1;                    ///< LOCAL_WORLD_SIZE (default: world when every rank is local)
  std::string master_addr = "127.0.0.1";  ///< MASTER_ADDR: the host rank 0 runs on
  int master_port = 29500;                ///< MASTER_PORT: its rendezvous port
};

/// The world the environment describes, or nothing when WORLD_SIZE is unset or 1. Inconsistent
/// or malformed variables throw htm::Error naming the variable and what was expected.
std::optional<WorldInfo> world_from_environment();

/// The `count` rows of a batch that rank `rank` of `world` trains on: a contiguous slice, the
/// slices as equal as possible (sizes differ by at most one), in rank order. {offset, rows}.
std::pair<int64_t, int64_t> rows_of_rank(int64_t count, int rank, int world);

class Communicator {
 public:
  /// Meets the other ranks through a TCPStore on MASTER_ADDR:MASTER_PORT (rank 0 serves it) and
  /// builds the Gloo process group. Every rank states its `identity` (the experiment's runs and
  /// config hashes): ranks that differ are refused, each naming the other's. Throws htm::Error
  /// when the rendezvous does not complete within `timeout` (unreachable MASTER_ADDR, a rank
  /// that never starts), which also bounds every later collective: a rank that dies makes the
  /// others fail with an error at their next collective, within `timeout` at the latest.
  Communicator(const WorldInfo& world, const std::string& identity, std::chrono::seconds timeout);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return info_.rank; }
  int world() const { return info_.world; }
  const WorldInfo& info() const { return info_; }

  /// Sums `values` over the ranks.
  std::vector<double> sum(const std::vector<double>& values);
  /// Rank 0's tensor, copied into every rank's (same shape and dtype everywhere).
  void broadcast(at::Tensor& tensor);
  /// Rank 0's bytes on every rank (any length).
  std::string broadcast_bytes(const std::string& bytes);
  /// Starts summing a flat float32 buffer over the ranks; wait_all() ends every started sum.
  void start_all_reduce(at::Tensor& buffer);
  void wait_all();

 private:
  struct Impl;
  WorldInfo info_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace htm
