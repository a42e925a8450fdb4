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

#include <functional>
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
/// The entries of an .npz file one at a time, in the archive's order (a checkpoint of a model larger
/// than the host's memory is read a tensor at a time).
using NpzVisitor = std::function<void(const std::string &name, TensorPtr t)>;
void forEachNpzEntry(const std::string &path, const NpzVisitor &visit);
/// The same from an archive in memory (`what` names it in errors).
NamedTensors readNpzBytes(const std::string &bytes, const std::string &what);
void writeNpz(const std::string &path, const NamedTensors &tensors);
/// A tensor written by a streaming writer (an .npz entry, a safetensors tensor): its name, type and
/// shape, and what fetches it when the writer reaches it (it is dropped after: one tensor in host
/// memory at a time).
struct TensorSource {
  std::string name;
  DType dtype;
  Shape shape;
  std::function<TensorPtr()> fetch;
};
/// writeNpz's archive, each entry fetched as it is written (atomically, as writeNpz).
void writeNpzStreamed(const std::string &path, const std::vector<TensorSource> &entries);
/// A .npy file's header (magic, version, the padded dict) for an array of this type and shape.
std::string npyHeader(DType dtype, const Shape &shape);
/// FP8 tensors travel as their uint8 codes: a uint8 tensor read where the plan holds `want`, an
/// FP8 type, takes that type (the same bytes). Any other tensor is left as it is.
void adoptFp8Codes(Tensor &t, DType want);
/// zlib's CRC-32 continued from `crc` over `n` bytes, for any n (plans and checkpoints past 4 GiB).
uint32_t crc32Of(uint32_t crc, const void *data, size_t n);
/// Writes bytes to path atomically; throws Error.
void writeFileAtomically(const std::string &path, const std::string &bytes);
/// The same, the bytes written by `write` through `put(data, n)` (a temporary file, fsync, rename).
void writeFileAtomically(const std::string &path,
                         const std::function<void(const std::function<void(const void *, size_t)> &put)> &write);

} // namespace octet::rt

#endif
