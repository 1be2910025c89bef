// The .ember file format, version 1. Every version ember ever wrote stays readable
// (tests/record/fixtures/v<N>/ holds files of each, loaded by the test suite forever).
//
//   offset  size  field (integers little-endian)
//   0       8     magic: 89 45 4D 42 0D 0A 1A 0A  ("\x89EMB\r\n\x1a\n": a high byte and
//                 CR LF / ^Z / LF, so text-mode transfers and truncations are caught)
//   8       4     format_version (u32) = 1
//   12      4     flags (u32) = 0; a v1 reader refuses any bit set
//   16      8     data_offset (u64) = 256
//   24      8     data_size (u64): bytes of the data section
//   32      8     meta_offset (u64) = data_offset + data_size
//   40      8     meta_size (u64): bytes of the JSON metadata; meta_offset + meta_size is
//                 the file's size
//   48      4     meta_crc32 (u32): CRC-32 (IEEE, as zlib's crc32) of the metadata bytes
//   52      4     preamble_crc32 (u32): CRC-32 of bytes 0..51
//   56      200   zero
//   256     ...   data: each tensor's elements, row-major, little-endian, at an offset
//                 (from data_offset) that is a multiple of 256, zero padding between
//   ...     ...   metadata: UTF-8 JSON, an object:
//     "format": "ember", "format_version": 1, "ember_version": "0.1.0",
//     "tensors": [ {"path": "fc.weight", "dtype": "f32", "shape": [2, 3],
//                   "offset": 0, "size": 24, "crc32": 1099480966,
//                   "role": "param", "param_id": 1, "trainable": true}, ... ],
//     "config": {...} (the model's config when saved with one; absent otherwise),
//     "metadata": {"key": "value", ...} (user strings)
//
// dtype is one of f64 f32 f16 bf16 i64 i32 i16 i8 u8 bool (bool one byte, 0 or 1); shape
// [] is a scalar (one element); size = elements * element size; crc32 covers the tensor's
// size bytes. role is "param" or "buffer" (param_id and trainable matter for params: they
// restore the module's ParamId, which optimizer state is keyed by). Tensors appear in the
// module's visit order; paths are unique.
//
// Writing streams: the preamble is reserved, each tensor is copied to the host, written
// and checksummed one at a time, the metadata follows, and the preamble is filled in last
// — all in a temporary file in the destination's directory, fsync'd and renamed into
// place. The data comes first so that a whole tensor never waits in memory for its
// checksum, and at 256-byte alignment so a mapped file's tensors are aligned for any SIMD
// width.
//
// Reading checks everything before use: the magic, the version (a newer one is refused
// with a message saying so), the flags, the preamble's and metadata's checksums, that
// the sections tile the file exactly, and for every tensor its dtype, shape (element
// count and byte size with overflow-checked arithmetic), alignment, bounds, overlap with
// the others and, as it is loaded, its checksum.
//
// Compatibility rule for later versions: bytes 0..15 keep their meaning forever, so any
// reader can tell a file's version; a new version gets a new number, a fixture directory
// and a reader path, and never changes how version 1 is read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::record::ember_format {

inline constexpr unsigned char kMagic[8] = {0x89, 'E', 'M', 'B', '\r', '\n', 0x1a, '\n'};
inline constexpr std::uint32_t kVersion = 1;  // the version this ember writes
inline constexpr std::uint32_t kNewestReadable = 1;
inline constexpr std::uint64_t kAlignment = 256;
inline constexpr std::uint64_t kPreambleSize = 256;  // = data_offset

// Preamble field offsets.
inline constexpr std::size_t kVersionAt = 8, kFlagsAt = 12, kDataOffsetAt = 16, kDataSizeAt = 24,
                             kMetaOffsetAt = 32, kMetaSizeAt = 40, kMetaCrcAt = 48,
                             kPreambleCrcAt = 52;

}  // namespace ember::record::ember_format
