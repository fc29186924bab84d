// A process-wide kernel setting held for a scope and restored after it: which kernels, the
// products' precision, whether MLPs recompute (the host sets each per run; tests compare choices).
#pragma once

namespace htm {

/// Sets the value through `Set` until destroyed, then restores the one `Get` read before.
template <class T, T (*Get)(), void (*Set)(T)>
class SettingScope {
 public:
  explicit SettingScope(T value) : previous_(Get()) { Set(value); }
  ~SettingScope() { Set(previous_); }
  SettingScope(const SettingScope&) = delete;
  SettingScope& operator=(const SettingScope&) = delete;

 private:
  T previous_;
};

}  // namespace htm
