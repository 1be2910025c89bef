// The umbrella header: everything a user of ember needs.
#pragma once

#include "ember/base/distribution.hpp"
#include "ember/base/dtype.hpp"
#include "ember/base/error.hpp"
#include "ember/base/shape.hpp"
#include "ember/base/tensor_data.hpp"
#include "ember/data/idx.hpp"
#include "ember/nn/nn.hpp"
#include "ember/optim/optim.hpp"
#include "ember/record/record.hpp"
#include "ember/tensor/activation.hpp"
#include "ember/tensor/device.hpp"
#include "ember/tensor/dyn_tensor.hpp"
#include "ember/tensor/gradients.hpp"
#include "ember/tensor/module_ops.hpp"
#include "ember/tensor/ops.hpp"
#include "ember/tensor/tensor.hpp"
