// fusion::report(device): what the Fusion decorator of a device fused, for tools and
// tests (docs/fusion.md explains the fields). The device may be the Fusion device itself
// or a decorator stack around it (Device::cpu().fusion().autodiff()).
#pragma once

#include "ember/backend/fused_group.hpp"
#include "ember/tensor/device.hpp"

namespace ember::fusion {

using backend::CloseReason;
using backend::FusionGroupInfo;
using backend::FusionReport;

// Throws ember::Error when no Fusion decorator is in device's stack.
FusionReport report(const Device& device);
void reset_report(const Device& device);
// Whether device's stack holds a Fusion decorator.
bool is_fused(const Device& device);

}  // namespace ember::fusion
