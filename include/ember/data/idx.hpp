// IDX files (the MNIST family's format), plain or gzip-compressed: the first piece of the
// data layer. An IDX file holds one tensor: a magic number naming the element type, the
// extents of each dim and the elements, all big-endian.
#pragma once

#include <string>

#include "ember/base/tensor_data.hpp"

namespace ember::data {

// Reads the tensor in an IDX file (gzip or not, detected from its content). Element types
// map to u8, i8, i16, i32, f32 and f64. Throws ember::Error naming the file when it is
// missing, truncated, has trailing bytes or a bad header.
TensorData load_idx(const std::string& path);

// Writes data as a gzip-compressed IDX file (dtypes u8, i8, i16, i32, f32, f64). Throws
// ember::Error naming the file on failure.
void save_idx(const std::string& path, const TensorData& data);

}  // namespace ember::data
