//===- Kernels.h - Internal kernel helpers ----------------------*- C++ -*-===//
#ifndef OCTET_RUNTIME_SRC_KERNELS_H
#define OCTET_RUNTIME_SRC_KERNELS_H

#include "octet/runtime/Executor.h"

#include <map>

namespace octet::rt {

void registerOnnxKernels(std::map<std::string, Kernel> &k);
void registerFp8Kernels(std::map<std::string, Kernel> &k);
void registerAttentionKernels(std::map<std::string, Kernel> &k);
void registerCollectiveKernels(std::map<std::string, Kernel> &k);

int64_t normAxis(const KernelContext &c, int64_t axis, int64_t rank);
Shape broadcastShapes(const KernelContext &c, const std::vector<Shape> &shapes);
std::vector<int64_t> broadcastStrides(const Shape &s, const Shape &out);
std::vector<int64_t> contiguousStrides(const Shape &s);
Tensor transpose(const Tensor &x, const std::vector<int64_t> &perm);

} // namespace octet::rt

#endif
