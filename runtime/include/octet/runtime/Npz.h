//===- Npz.h - NumPy .npy / .npz files --------------------------*- C++ -*-===//
//
// Inputs, outputs, dumped values and FP8 state travel as NumPy archives so
// Python (numpy, onnxruntime) reads them directly. FP8 tensors are stored as
// their uint8 codes. Writes are atomic (temporary file, fsync, rename).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_NPZ_H
#define OCTET_RUNTIME_NPZ_H

#include "octet/runtime/Tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace octet::rt {

using NamedTensors = std::vector<std::pair<std::string, TensorPtr>>;

std::string encodeNpy(const Tensor &t);
/// A .npy file's header: its element type as numpy writes it ('<u2', '|u1', '<f4'...), its shape (C
/// order; Fortran order is refused) and where its data starts. Throws Error naming `what`.
struct NpyHeader {
  std::string descr;
  Shape shape;
  size_t dataOffset = 0;
};
NpyHeader decodeNpyHeader(const std::string &bytes, const std::string &what);
/// The array, in the element types Octet stores ('<u2' is BF16's bits: numpy has no bfloat16).
TensorPtr decodeNpy(const std::string &bytes, const std::string &what);
NamedTensors readNpz(const std::string &path);
/// The same from an archive in memory (`what` names it in errors).
NamedTensors readNpzBytes(const std::string &bytes, const std::string &what);
void writeNpz(const std::string &path, const NamedTensors &tensors);
/// FP8 tensors travel as their uint8 codes: a uint8 tensor read where the plan holds `want`, an
/// FP8 type, takes that type (the same bytes). Any other tensor is left as it is.
void adoptFp8Codes(Tensor &t, DType want);
/// zlib's CRC-32 continued from `crc` over `n` bytes, for any n (plans and checkpoints past 4 GiB).
uint32_t crc32Of(uint32_t crc, const void *data, size_t n);
/// Writes bytes to path atomically; throws Error.
void writeFileAtomically(const std::string &path, const std::string &bytes);

} // namespace octet::rt

#endif
