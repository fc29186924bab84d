// runtime.cuda_graph's state inside a TrainStep (train/step_graph.cpp): one captured step per
// shape, and what the run's graphs share. Private to train/: step.cpp owns it, step_graph.cpp uses it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "train/device_graph.h"
#include "train/step.h"

namespace htm {

struct TrainStep::CapturedStep {
  std::unique_ptr<DeviceGraph> graph;
  int warmups = 0;
  bool ready = false;
  Batch inputs;                                                // the graph reads its inputs here
  std::vector<std::pair<torch::Tensor, torch::Tensor>> grads;  // each parameter's gradient, as written
  // What the host reads after a replay, gathered by the graph itself into one float64 tensor: the
  // mean loss, each check the capture left on the device, a logged step's metrics, then (ema) the
  // baseline as it stood before the step.
  torch::Tensor reads;
  size_t flags = 0;
  std::vector<std::string> metrics;  // their names
};

struct TrainStep::Graphs {
  using Key = std::tuple<std::vector<int64_t>, std::vector<int64_t>, bool>;  // input shape, schedule, logged
  RuntimeCudaGraph mode;
  c10::Device device;
  uint64_t seed = 0;    // this step's
  std::string failure;  // why the run steps without graphs
  bool told = false;    // and whether stderr was told
  std::map<Key, CapturedStep> steps;
  DeviceGraph* pool = nullptr;  // the first graph captured: the others share its memory pool
  int64_t captured = 0, replayed = 0, redone = 0, eager = 0;
  std::vector<int64_t> nodes;  // each capture's nodes, where the torch says (DeviceGraph::nodes)
};

}  // namespace htm
