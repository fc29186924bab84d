// Which plugin an exception came out of. The host marks each call into a plugin with a
// PluginScope; a scope left by an exception records its plugin (the innermost one wins), and
// the runner names that plugin in the run's error. Under a supervisor the scope also marks its
// plugin on the run's board, so a crash inside it is named too (board/run_board.h). A policy's
// call also runs in fp32 whatever runtime.precision says: merge and unmerge logits, and the
// sampling on them, stay exact.
#pragma once

#include <exception>

#include "board/run_board.h"
#include "htm/manifest.h"
#include "kernels/precision.h"

namespace htm {

struct PluginFault {
  PluginKind kind = PluginKind::policy;
  const void* object = nullptr;  ///< the plugin object's most-derived address; nullptr: none failed
};

/// The plugin the last exception left, on this thread (cleared by take_plugin_fault()).
inline thread_local PluginFault g_plugin_fault;

inline PluginFault take_plugin_fault() {
  PluginFault fault = g_plugin_fault;
  g_plugin_fault = {};
  return fault;
}

class PluginScope {
 public:
  /// `plugin`: the plugin object (recorded by its most-derived address, as the registry knows it);
  /// `call`: the call's name, a string literal (a watchdog names it: "choose_merges").
  template <class T>
  PluginScope(PluginKind kind, const T* plugin, const char* call = nullptr)
      : kind_(kind),
        object_(dynamic_cast<const void*>(plugin)),
        exceptions_(std::uncaught_exceptions()),
        board_previous_(board_enter(object_, call, &previous_call_)),
        precision_(kind == PluginKind::policy ? Precision::fp32 : matmul_precision()) {}
  ~PluginScope() {
    board_leave(board_previous_, previous_call_);
    if (std::uncaught_exceptions() > exceptions_ && g_plugin_fault.object == nullptr) g_plugin_fault = {kind_, object_};
  }
  PluginScope(const PluginScope&) = delete;
  PluginScope& operator=(const PluginScope&) = delete;

 private:
  PluginKind kind_;
  const void* object_;
  int exceptions_;
  const char* previous_call_ = nullptr;  ///< the call before this scope's (set by board_enter)
  int board_previous_;                   ///< the plugin a supervised run's board showed before this scope
  PrecisionScope precision_;
};

}  // namespace htm
