// ember::optim: optimizers, learning-rate schedulers, gradient clipping and accumulation
// (DESIGN §2.2). docs/optim.md is the reference.
#pragma once

#include "ember/optim/adafactor.hpp"
#include "ember/optim/adagrad.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/adan.hpp"
#include "ember/optim/clipping.hpp"
#include "ember/optim/gradients_params.hpp"
#include "ember/optim/lbfgs.hpp"
#include "ember/optim/lion.hpp"
#include "ember/optim/lr_scheduler.hpp"
#include "ember/optim/muon.hpp"
#include "ember/optim/optimizer.hpp"
#include "ember/optim/param_groups.hpp"
#include "ember/optim/rmsprop.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/optim/state.hpp"
#include "ember/optim/state_record.hpp"
