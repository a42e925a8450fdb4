//===- CudaExecutor.h - Runs whole plans on an NVIDIA GPU ------*- C++ -*-===//
//
// The CUDA backend's plan executor (liboctet_cuda). At load it folds the
// plan's constant subgraphs on the host (shape arithmetic, masks), places
// every activation at the compiler's arena offset in one device allocation,
// keeps parameters and state on the device, and turns each remaining op into
// stream-ordered launches with static arguments. The first run is eager; the
// next is captured as a CUDA graph (one per run kind) that later runs replay.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_CUDAEXECUTOR_H
#define OCTET_RUNTIME_CUDAEXECUTOR_H

#include "octet/runtime/Executor.h"

#include <iosfwd>
#include <map>
#include <memory>

namespace octet::rt::cuda {

struct CudaOptions {
  bool graphs = true; // capture the step as a CUDA graph after the first run
  bool jit = true;    // generated kernels (NVRTC) for Pointwise programs (else, or without NVRTC,
                      // the interpreter kernel)
  bool chains = true; // with jit: the plan's pointwise_chain fusion groups each in one generated kernel
                      // (off, for debugging and tests: each program alone)
  bool castSums = true; // a column sum (ReduceSum over the rows: a bias gradient) of a tensor that an
                        // fp8.cast_amax with a transposed copy reads first is taken in that cast's pass
  bool castSources = true; // the FP8 casts of one tensor in one pass, which also computes the tensor where a
                           // LayerNorm, GELU or (with jit) Pointwise program writes it for them alone
                           // (their FP8 output; the GELU gradient's cast)
  bool foldBias = true; // an FP8 GEMM's bias is added by the one op that reads its result (a residual
                        // Add, or the Transpose that splits heads) instead of in a pass of its own
  bool residualNorms = true; // a LayerNorm the plan groups with the residual Add before it (residual_norm)
                             // computes the sum from the Add's operands in its own pass
  bool cudnnAttention = true; // BF16 attention through cuDNN's fused SDPA where cuDNN 9 loads and has an
                              // engine for the shape; else (or false) Attention.cu's kernels
  /// cuDNN's deterministic attention backward on Hopper takes a workspace quadratic in the sequence
  /// (batch x heads x Tq x Tk x 2 bytes: 1 GiB at 8 x 16 heads x 2048). Where the plan's
  /// AttentionGrad carries max_workspace_bytes (fp8-opt --attention-workspace-bytes), one op runs
  /// as several launches over slices of its batch, the fewest whose workspace fits (each (batch,
  /// head) pair is computed alone: the same bits). Above 0, this bound replaces the plan's
  /// (debugging: OCTET_CUDA_ATTENTION_WORKSPACE_MIB).
  size_t attentionWorkspaceBytes = 0;
};

/// Registers the "cuda" device backend with the runtime (fp8-run does this
/// when it links liboctet_cuda). Options come from OCTET_CUDA_GRAPHS=0,
/// OCTET_CUDA_JIT=0, OCTET_CUDA_CHAINS=0, OCTET_CUDA_CAST_SUMS=0, OCTET_CUDA_CAST_SOURCES=0,
/// OCTET_CUDA_FOLD_BIAS=0, OCTET_CUDA_RESIDUAL_NORMS=0 and OCTET_CUDA_CUDNN=0 (debugging and ablations: the same arithmetic
/// launched otherwise, or Attention.cu's kernels instead of cuDNN's); what is computed (GEMM
/// accumulation, attention precision) is the plan's.
void registerBackend();

/// Throws Error when no usable GPU is present or the plan needs FP8 and the
/// GPU lacks it (compute capability below 8.9; OCTET_CUDA_FAKE_CC overrides
/// the reported capability for testing that message).
std::unique_ptr<Runner> makeCudaRunner(Plan plan, CudaOptions o = {});

/// Differential check of every GPU kernel the plan uses: runs the plan once on
/// the CPU reference, then each op on the GPU from the CPU's own inputs, and
/// compares outputs (FP8, integer and boolean values bit for bit; GEMMs and
/// TF32 attention by ||error|| / ||reference|| <= 1e-3, BF16 attention by
/// <= 1e-2; other floats by max |error| / max |reference| <= 1e-5). Prints one
/// line per op type; returns the number of ops out of tolerance.
int checkAgainstCpu(Plan plan, const std::map<std::string, TensorPtr> &inputs, std::ostream &os,
                    CudaOptions o = {});

/// What the runner's load-time fusions made, by kind: FP8 casts ("casts share a read", "cast
/// computes LayerNorm", "cast computes GELU", "cast computes Pointwise", and "casts in fused
/// passes" in all but the last), Pointwise chains ("chain results kept in registers": results
/// not written), the cuDNN attention graphs built ("attention through cuDNN", one per shape
/// and direction) and the FP8 GEMMs with rowwise scales ("rowwise GEMMs scaled by cuBLASLt":
/// its outer-vector mode, the result written by the GEMM; "rowwise GEMMs scaled in an epilogue
/// pass": a float32 product scaled by a pass over it); empty for other runners.
std::map<std::string, int> fusions(const Runner &r);

/// Bytes this process holds on the GPU through the runner (arena, parameters,
/// state, scratch, workspaces), and the device's name.
size_t deviceBytes(const Runner &r);
/// deviceBytes() by what holds them ("arena", "parameters and state", "scratch", ...).
std::map<std::string, size_t> deviceMemory(const Runner &r);
std::string deviceName();

} // namespace octet::rt::cuda

#endif
