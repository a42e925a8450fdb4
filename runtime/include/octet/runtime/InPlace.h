//===- InPlace.h - Which plan ops may write over or share an operand -*- C++ -*-===//
//
// An in-place state update (docs/PLAN.md, `"in_place"`) lets the op computing a state's new
// value write the state's bytes. When that op also reads the old value, it must read element
// i only where it writes element i: the elementwise ops below (their operands that have the
// result's shape). The compiler's plan writer (lib/Conversion/PlanExport.cpp) and the runtime's
// plan check (runtime/src/Plan.cpp) both read this list.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_INPLACE_H
#define OCTET_RUNTIME_INPLACE_H

#include <string_view>

namespace octet::rt {

/// fp8.adam_step (MS-AMP's fused Adam) reads every element first (a pass for the new moments'
/// amaxes, writing nothing but scratch) and then, in its update pass, reads element i (weight,
/// gradient, moments) where it writes element i; its new scale_invs are written from scratch
/// that holds the old ones (CPU: runtime/src/Fp8Kernels.cpp; CUDA: runtime/cuda/Optim.cu).
inline bool readsElementForElement(std::string_view opType) {
  static constexpr std::string_view ops[] = {"octet::Pointwise", "Add", "Sub", "Mul", "Div", "Neg",
                                             "Abs", "Sqrt", "Exp", "Log", "Pow", "Max", "Min", "Where",
                                             "Relu", "Cast", "Reciprocal", "Identity", "fp8.adam_step"};
  for (std::string_view o : ops)
    if (o == opType)
      return true;
  return false;
}

/// Ops whose result is their first operand's bytes under another shape: the plan writer gives the
/// result its operand's arena buffer (a view, docs/PLAN.md) and the runtime then copies nothing.
inline bool isView(std::string_view opType) {
  return opType == "Reshape" || opType == "Squeeze" || opType == "Unsqueeze" || opType == "Flatten" ||
         opType == "Identity";
}

/// Ops whose result is their operand's buffer without being a view a reader may look through: the
/// done of an all-reduce in flight (its start reduced the buffer; the done only waits for it).
inline bool sharesOperandBuffer(std::string_view opType) {
  return isView(opType) || opType == "fp8.all_reduce_done";
}

/// The operand whose buffer an op's result may take when the op is that buffer's last reader
/// (`memory.in_place`, docs/PLAN.md), or -1. Every backend's kernel for the op reads all of the
/// operand's elements that a result element depends on before it writes that element: the loss
/// gradient finds a row's log-sum-exp before it writes the row, then reads and writes each
/// element in the same thread.
/// An all-reduce's (or reduce-scatter's) start reduces in place over the gradient it reads last; an fp8.gemm adds its
/// product to `accumulate` (input 6) element for element (cuBLASLt reads C where it writes D).
inline int resultTakesOperand(std::string_view opType) {
  if (opType == "fp8.gemm")
    return 6;
  return opType == "octet::SoftmaxCrossEntropyLossGrad" || opType == "fp8.all_reduce_start" ||
                 opType == "fp8.reduce_scatter_start"
             ? 0
             : -1;
}

} // namespace octet::rt

#endif
