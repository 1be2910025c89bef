// The data layer in one include (link ember::data): datasets, transforms, the DataLoader,
// and the datasets on files.
#pragma once

#include "ember/data/csv.hpp"
#include "ember/data/dataset.hpp"
#include "ember/data/idx.hpp"
#include "ember/data/image.hpp"
#include "ember/data/image_folder.hpp"
#include "ember/data/loader.hpp"
#include "ember/data/mnist.hpp"
#include "ember/data/random.hpp"
#include "ember/data/sqlite.hpp"
#include "ember/data/transforms.hpp"
