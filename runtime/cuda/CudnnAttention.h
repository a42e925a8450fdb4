//===- CudnnAttention.h - octet::Attention through cuDNN's fused SDPA -*- C++ -*-===//
//
// BF16 attention forward and backward through cuDNN 9's flash attention, built with the
// cudnn-frontend graph API once per shape when a plan loads. cuDNN is opened at run time
// (libcudnn.so.9 on the library path), so liboctet_cuda loads without it and the executor keeps
// Attention.cu's kernels where it is missing or refuses a shape. Same contract as
// dev::attentionForward / dev::attentionBackward (AttnArgs, BF16 precision): float32 tensors in
// and out, converted to and from BF16 copies in the workspace (projection biases added there).
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_CUDA_CUDNNATTENTION_H
#define OCTET_RUNTIME_CUDA_CUDNNATTENTION_H

#include "DeviceKernels.h"

#include <memory>
#include <string>

namespace octet::rt::cuda::dev {

/// Whether cuDNN 9 could be opened (the first call tries), with its version; why not otherwise.
bool cudnnAvailable(std::string *why = nullptr);
/// cuDNN's version as major * 10000 + minor * 100 + patch (0 where it is not available).
int cudnnVersion();

class CudnnAttention {
public:
  /// The forward (Y and LSE) or backward (dQ, dK, dV, deterministic) graph for a's shape, scale and
  /// mask; null with `why` set where cuDNN is missing or has no engine for it (head widths that are
  /// not multiples of 8, among others).
  static std::unique_ptr<CudnnAttention> build(const AttnArgs &a, bool backward, std::string &why);
  ~CudnnAttention();
  /// Device memory run() needs at AttnArgs::work: the BF16 copies and cuDNN's own workspace.
  size_t workspaceBytes() const;
  /// Runs on a.stream with a's pointers (the shape it was built for): forward reads q, k, v (and
  /// bias) and writes y and lse (lse may be null); backward reads q, k, v, yIn, lseIn, dy and writes
  /// dq, dk, dv.
  std::string run(const AttnArgs &a) const;
  /// run()'s cuDNN graph alone, on the BF16 copies run() leaves in the workspace (a benchmark's view
  /// of the fused kernels without the float32 conversions around them).
  std::string execute(const AttnArgs &a) const;

private:
  struct Impl;
  explicit CudnnAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace octet::rt::cuda::dev

#endif
