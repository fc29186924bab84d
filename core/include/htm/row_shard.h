// Data-parallel training splits each batch's rows over processes. The SDK's samplers draw their
// random numbers for the whole batch and keep this process's rows, so a run's decisions are the
// same whatever the number of processes. A plugin that draws random numbers itself with
// MergeContext::generator can do the same with draw_rows() (otherwise its draws still have the
// right distribution, but change with the number of processes).
#pragma once

#include <cstdint>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

namespace htm {

/// This process's rows of the batch being trained: [offset, offset + rows) of `total`.
/// total == 0: no data-parallel split (the whole batch is here).
struct RowShard {
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t total = 0;
};

/// The split in force on this thread (set by the host around a training step's forward pass,
/// kernels/row_shard_scope.h).
const RowShard& current_row_shard();

/// For a tensor of `rows` rows about to receive random draws: the rows to draw for and where
/// this process's rows start among them. Applies to a tensor whose rows are this process's batch
/// rows or a whole multiple of them, sample-major (B×…, or B·k×… flattened from B×k×…); {rows, 0}
/// otherwise (evaluation, or a tensor not shaped by the batch).
struct DrawRows {
  int64_t rows;
  int64_t offset;
};
DrawRows draw_rows(int64_t rows);

/// Standard normal noise shaped like `like`, drawn for the whole batch (draw_rows) from
/// `generator`, or torch's global generator when it is undefined. Without a split, the same
/// numbers as torch::randn_like.
at::Tensor normal_like_rows(const at::Tensor& like, c10::optional<at::Generator> generator = c10::nullopt);

}  // namespace htm
