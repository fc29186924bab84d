// What `htm run` is asked to do: the command line's options, as every way of running it reads
// them (runner.cpp in this process, process/launch.cpp for the processes it starts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace htm {

struct RunRequest {
  std::string file;
  std::vector<std::string> overrides;  ///< --set k=v
  std::vector<std::string> sweeps;     ///< --sweep k=a,b,c: grid axes added to the file's
  std::vector<std::string> variants;   ///< empty: all
  std::vector<int64_t> seeds;          ///< empty: the file's [experiment] seeds (confirm_seeds with confirm)
  bool confirm = false;      ///< --confirm: the named variants on the confirmation seeds, tagged phase=confirm
  bool reuse_seeds = false;  ///< --reuse-seeds: confirm on seeds whose data earlier runs drew (the ledger warns)
  int jobs = 1;
  bool rerun = false;             ///< --rerun: run again even when a finished run exists
  bool ignore_memory = false;     ///< --ignore-memory: train even past the memory estimate's refusal
  std::vector<std::string> tags;  ///< --tag key=value, stored on each run (tags table)
  std::string note;               ///< --note TEXT, stored as the tag "note"
  int verbosity = 1;              ///< 0 --quiet, 1, 2 --verbose (TrainerOptions::verbosity)
  int nproc = 1;                  ///< --nproc: data-parallel ranks started on this host
  std::string shard;              ///< --shard K/N: the K-th of N slices of the runs ("" all)
  bool supervise = false;         ///< each run in a supervised child process (htm run does; supervise.h)
};

}  // namespace htm
