// ember::nn: modules, configs, layers, initializers and losses (DESIGN §2.2).
#pragma once

#include "ember/nn/activation.hpp"
#include "ember/nn/attention.hpp"
#include "ember/nn/config.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/dropout.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/loss.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/pool.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/sequential.hpp"
