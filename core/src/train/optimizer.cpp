#include "train/optimizer.h"

#include <array>
#include <cmath>
#include <map>
#include <vector>

#include <torch/torch.h>

#include "htm/error.h"
#include "kernels/kernels.h"

namespace htm {

FusedAdamW::FusedAdamW(std::vector<torch::Tensor> params, double lr, double weight_decay, double beta1, double beta2,
                       double eps)
    : params_(std::move(params)), lr_(lr), weight_decay_(weight_decay), beta1_(beta1), beta2_(beta2), eps_(eps) {
  for (const auto& p : params_) {
    if (p.scalar_type() != torch::kFloat || !p.is_contiguous())
      throw Error("FusedAdamW needs contiguous float32 parameters");
    exp_avg_.push_back(torch::zeros_like(p));
    exp_avg_sq_.push_back(torch::zeros_like(p));
    steps_.push_back(0);
  }
}

int64_t FusedAdamW::state_bytes() const {
  int64_t bytes = 0;
  for (size_t k = 0; k < params_.size(); ++k) bytes += exp_avg_[k].nbytes() + exp_avg_sq_[k].nbytes();
  return bytes;
}

void FusedAdamW::zero_grad() {
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
}

void FusedAdamW::step() {
  torch::NoGradGuard no_grad;
  // The parameters at one step count take one update together (all of them, but for a
  // parameter whose gradient was missing at some step).
  std::map<int64_t, std::array<std::vector<torch::Tensor>, 4>> groups;
  for (size_t k = 0; k < params_.size(); ++k) {
    const torch::Tensor& grad = params_[k].grad();
    if (!grad.defined()) continue;
    auto& group = groups[++steps_[k]];
    group[0].push_back(params_[k]);
    group[1].push_back(exp_avg_[k]);
    group[2].push_back(exp_avg_sq_[k]);
    group[3].push_back(grad.contiguous());
  }
  for (auto& [t, group] : groups) {
    const double bias1 = 1 - std::pow(beta1_, static_cast<double>(t));
    const double bias2 = 1 - std::pow(beta2_, static_cast<double>(t));
    const AdamWStep s{static_cast<float>(1 - lr_ * weight_decay_),
                      static_cast<float>(beta1_),
                      static_cast<float>(beta2_),
                      static_cast<float>(1 - beta1_),
                      static_cast<float>(1 - beta2_),
                      static_cast<float>(lr_ / bias1),
                      static_cast<float>(std::sqrt(bias2)),
                      static_cast<float>(eps_)};
    adamw_update(group[0], group[1], group[2], group[3], s);
  }
}

}  // namespace htm

namespace htm {

void FusedAdamW::save(torch::serialize::OutputArchive& archive, const std::string& prefix) const {
  archive.write(prefix + "/steps", torch::tensor(steps_, torch::kLong));
  for (size_t k = 0; k < params_.size(); ++k) {
    archive.write(prefix + "/exp_avg/" + std::to_string(k), exp_avg_[k]);
    archive.write(prefix + "/exp_avg_sq/" + std::to_string(k), exp_avg_sq_[k]);
  }
}

void FusedAdamW::load(torch::serialize::InputArchive& archive, const std::string& prefix) {
  torch::Tensor steps;
  archive.read(prefix + "/steps", steps);
  if (steps.numel() != static_cast<int64_t>(params_.size()))
    throw Error("the checkpoint's optimiser holds " + std::to_string(steps.numel()) + " parameters, this model " +
                std::to_string(params_.size()));
  torch::NoGradGuard no_grad;
  for (size_t k = 0; k < params_.size(); ++k) {
    steps_[k] = steps[static_cast<int64_t>(k)].item<int64_t>();
    torch::Tensor m, v;
    archive.read(prefix + "/exp_avg/" + std::to_string(k), m);
    archive.read(prefix + "/exp_avg_sq/" + std::to_string(k), v);
    if (m.sizes() != exp_avg_[k].sizes() || v.sizes() != exp_avg_sq_[k].sizes())
      throw Error("the checkpoint's optimiser state does not fit this model's parameters");
    exp_avg_[k].copy_(m);
    exp_avg_sq_[k].copy_(v);
  }
}

}  // namespace htm
