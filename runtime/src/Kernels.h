//===- Kernels.h - Internal kernel helpers ----------------------*- C++ -*-===//
#ifndef OCTET_RUNTIME_SRC_KERNELS_H
#define OCTET_RUNTIME_SRC_KERNELS_H

#include "octet/runtime/Executor.h"

#include <map>

namespace octet::rt {

void registerOnnxKernels(std::map<std::string, Kernel> &k);
void registerShapeKernels(std::map<std::string, Kernel> &k);
void registerFp8Kernels(std::map<std::string, Kernel> &k);
void registerAttentionKernels(std::map<std::string, Kernel> &k);
void registerCollectiveKernels(std::map<std::string, Kernel> &k);

int64_t normAxis(const KernelContext &c, int64_t axis, int64_t rank);
Shape broadcastShapes(const KernelContext &c, const std::vector<Shape> &shapes);
std::vector<int64_t> broadcastStrides(const Shape &s, const Shape &out);
std::vector<int64_t> contiguousStrides(const Shape &s);
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm);

/// Calls f(outIndex, offsets) for every output element, in order. The innermost dimension runs as
/// a tight loop (each input's offset a multiple of its stride there); the outer ones carry.
template <typename F>
void forEachBroadcast(const Shape &out, const std::vector<std::vector<int64_t>> &strides, F f) {
  int64_t n = numElements(out);
  size_t rank = out.size(), k = strides.size();
  std::vector<int64_t> idx(rank, 0), off(k, 0), cur(k, 0), step(k, 0);
  if (n == 0)
    return;
  if (rank == 0) {
    f(int64_t(0), off.data());
    return;
  }
  int64_t inner = out[rank - 1];
  for (size_t j = 0; j < k; ++j)
    step[j] = strides[j][rank - 1];
  for (int64_t i = 0; i < n; i += inner) {
    for (size_t j = 0; j < k; ++j)
      cur[j] = off[j];
    for (int64_t e = 0; e < inner; ++e) {
      f(i + e, cur.data());
      for (size_t j = 0; j < k; ++j)
        cur[j] += step[j];
    }
    for (size_t d = rank - 1; d-- > 0;) {
      ++idx[d];
      for (size_t j = 0; j < k; ++j)
        off[j] += strides[j][d];
      if (idx[d] < out[d])
        break;
      for (size_t j = 0; j < k; ++j)
        off[j] -= strides[j][d] * out[d];
      idx[d] = 0;
    }
  }
}

/// Calls f(T()) with the C++ type of a numeric element type (Bool as uint8_t); fails otherwise.
template <typename F> void dispatchNumeric(const KernelContext &c, DType t, F f) {
  switch (t) {
  case DType::F32: f(float()); return;
  case DType::F64: f(double()); return;
  case DType::I64: f(int64_t()); return;
  case DType::I32: f(int32_t()); return;
  case DType::I8: f(int8_t()); return;
  case DType::U8: f(uint8_t()); return;
  case DType::Bool: f(uint8_t()); return;
  default: c.fail(std::string("element type ") + dtypeName(t) + " is not supported here");
  }
}


} // namespace octet::rt

#endif
