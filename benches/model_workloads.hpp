// The model-sized workloads: attention (forward, and forward and backward; composed or
// through scaled_dot_product_attention), and the training steps that run through
// the Autodiff decorator -- an LSTM-like recurrence (autodiff overhead), the
// Fashion-MNIST MLP and a RoBERTa-like transformer encoder. Listed in benches/workloads.cpp.
#pragma once

#include "workloads.hpp"

namespace ember::bench {

Case attention_case(SizeKind s, const Device& dev);
Case sdpa_case(SizeKind s, const Device& dev);
Case attention_grad_case(SizeKind s, const Device& dev);
Case sdpa_grad_case(SizeKind s, const Device& dev);
Case sdpa_bf16_case(SizeKind s, const Device& dev);
Case sdpa_grad_bf16_case(SizeKind s, const Device& dev);
Case autodiff_overhead_case(SizeKind s, const Device& dev);
Case mlp_train_step_case(SizeKind s, const Device& dev);
Case cnn_train_step_case(SizeKind s, const Device& dev);
Case resnet_train_step_case(SizeKind s, const Device& dev);
Case transformer_encoder_step_case(SizeKind s, const Device& dev);

}  // namespace ember::bench
