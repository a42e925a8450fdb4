//===- Attention.h - octet::Attention limits shared with the compiler -*- C++ -*-===//
//
// octet::Attention / octet::AttentionGrad (docs/PLAN.md) run on the CPU reference for any
// head width; the CUDA kernels (runtime/cuda/Attention.cu) hold a head row in registers and
// take heads up to this wide. octet-fuse-attention's max-head-dim defaults to it.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_ATTENTION_H
#define OCTET_RUNTIME_ATTENTION_H

namespace octet::rt {
constexpr int kCudaAttentionMaxHeadDim = 128;
} // namespace octet::rt

#endif
