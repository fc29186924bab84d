// The host's side of htm/row_shard.h: it sets this process's rows of the batch around a
// data-parallel training step's forward pass. Not part of the SDK: plugins only read the split.
#pragma once

#include "htm/row_shard.h"

namespace htm {

/// Sets the split for the current thread until destroyed.
class RowShardScope {
 public:
  explicit RowShardScope(RowShard shard);
  ~RowShardScope();
  RowShardScope(const RowShardScope&) = delete;
  RowShardScope& operator=(const RowShardScope&) = delete;

 private:
  RowShard previous_;
};

}  // namespace htm
