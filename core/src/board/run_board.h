// What a supervised run's process is doing, published where its supervisor can read it after
// the process died: the run and database it claimed, the step it is training and the plugin
// executing. `htm run` creates the board (one small file, mapped shared), names it in the
// child's HTM_RUN_BOARD, and reads it when the child ends by a signal: a segfault in a plugin
// can record nothing itself, but the page it wrote to stays (docs/reliability.md).
#pragma once

#include <cstdint>
#include <string>

#include "htm/manifest.h"

namespace htm {

inline constexpr int kBoardPlugins = 16;

struct BoardPlugin {
  char kind[16];
  char name[96];
  char version[32];
  char path[512];
};

/// The board's layout: plain data, written by the child and read by its supervisor.
struct RunBoard {
  char magic[8];   ///< "htmrun1"
  int64_t run_id;  ///< 0 until the child claimed its run
  int64_t step;    ///< the step being trained (1-based; 0 before training)
  int64_t total_steps;
  int32_t current;           ///< index into plugins of the plugin executing; -1 none
  int32_t count;             ///< plugins listed
  int32_t database_corrupt;  ///< 1: the run met a malformed database (start nothing more there)
  int32_t reserved;
  char db[1024];      ///< the results database the run is recorded in
  char label[256];    ///< "experiment/variant seed S"
  char variant[128];  ///< the run being attempted (board_attempt), claimed or not
  int64_t seed;
  BoardPlugin plugins[kBoardPlugins];
};

// ---- the child's side: each call does nothing when this process has no board

/// Maps the board named by HTM_RUN_BOARD (each path once). Whether this process has one.
bool open_run_board();
/// The run this process attempts next, before its plugins are built and it is claimed (a
/// data-parallel rank runs a study's runs one after another): nothing claimed, no step, so a
/// crash in construction is that run's, not the last one's.
void board_attempt(const std::string& label, const std::string& variant, int64_t seed);
/// The run this process trains, once claimed.
void board_run(int64_t run_id, const std::string& db, const std::string& label);
/// The run's database turned out malformed: the supervisor starts no more runs.
void board_database_corrupt();
/// The step being trained (1-based) of `total`.
void board_step(int64_t step, int64_t total);
/// A plugin this process is about to build: it becomes the one executing, and returns its
/// slot; board_built() then ties the built object to the slot and restores `previous`.
int board_building(PluginKind kind, const std::string& name, const std::string& version, const std::string& path,
                   int* previous);
void board_built(int slot, const void* object, int previous);
/// PluginScope's part: the plugin object entered (returns the previous one), and left.
int board_enter(const void* object);
void board_leave(int previous);

// ---- the supervisor's side

/// A fresh board file (zeroed, with its magic) under the temporary folder; its path.
std::string create_run_board();
/// Reads a board file; false when it is missing, short or never written.
bool read_run_board(const std::string& path, RunBoard* out);
/// "policy plugin 'crashy' 1.0.0 (/path/htm_policy_crashy.so)", or "" when none was executing.
std::string board_plugin_text(const RunBoard& board);

}  // namespace htm
