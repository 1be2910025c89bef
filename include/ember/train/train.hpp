// The train layer (library ember::train): the Learner and its builder, the Evaluator, the
// metric interface and the basic metrics, the history, logs, dashboard and checkpoints.
// docs/train.md is the guide.
#pragma once

#include "ember/train/checkpoint.hpp"
#include "ember/train/curves.hpp"
#include "ember/train/dashboard.hpp"
#include "ember/train/evaluator.hpp"
#include "ember/train/history.hpp"
#include "ember/train/interrupter.hpp"
#include "ember/train/learner.hpp"
#include "ember/train/logger.hpp"
#include "ember/train/metric.hpp"
#include "ember/train/metrics.hpp"
#include "ember/train/metrics_basic.hpp"
#include "ember/train/plot.hpp"
#include "ember/train/step.hpp"
