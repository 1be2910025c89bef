// Training curves from a History, as pictures: for every metric, its per-epoch train and
// valid values (curves/<metric>.png and .svg) and its per-step training values with their
// exponential moving average (curves/<metric>_steps.png and .svg). The Learner writes them
// at the end of each epoch; a custom loop that keeps a History calls it itself.
#pragma once

#include <string>

#include "ember/train/history.hpp"

namespace ember::train {

// Writes the pictures under dir/curves/ (created); `smoothing` is the moving average's
// weight of the past (0: no smoothing). An ember::Error when a file cannot be written.
void write_curves(const History& history, const std::string& dir, double smoothing = 0.9);

}  // namespace ember::train
