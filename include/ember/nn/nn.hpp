// ember::nn: modules, configs, layers, initializers and losses (DESIGN §2.2).
#pragma once

#include "ember/nn/config.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/sequential.hpp"
