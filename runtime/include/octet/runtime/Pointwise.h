//===- Pointwise.h - The octet::Pointwise op's program ------------*- C++ -*-===//
//
// `octet::Pointwise` (written by the compiler's octet-fuse-pointwise pass) is
// a chain of float32 elementwise ONNX ops evaluated per element of its
// output: inputs broadcast to the output's shape, `ops` names the op of each
// instruction and `args` gives three operand slots per instruction (k below
// the input count: input k; above: the result of instruction k - #inputs; -1:
// none). The last instruction's result is the output. Both backends parse the
// program here; the CPU evaluates each op with the same float arithmetic as
// its single-op kernel.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_POINTWISE_H
#define OCTET_RUNTIME_POINTWISE_H

#include "octet/runtime/Plan.h"

#include <cstdint>
#include <string_view>
#include <vector>

namespace octet::rt {

enum class PwOp : uint8_t {
  Add, Sub, Mul, Div, Pow, Max, Min, // binary
  Neg, Abs, Sqrt, Recip, Tanh, Sigmoid, Erf, Exp, Log, Relu,
  Where, // args[0] (an input, boolean) ? args[1] : args[2]
};

struct PwInstr {
  PwOp op;
  int arg[3]; // -1: none
};

struct PwProgram {
  int numInputs = 0;
  std::vector<PwInstr> code;
};

/// At most this many inputs and instructions in one program (the CUDA kernel's fixed arguments).
constexpr int kPointwiseMaxInputs = 8, kPointwiseMaxOps = 48;

/// The ONNX op types a program may hold, with their instruction and operand count; the
/// compiler's octet-fuse-pointwise and the runtimes' parser both read this table.
struct PwOpInfo {
  std::string_view onnxType;
  PwOp op;
  int arity;
};
inline const PwOpInfo *lookupPointwiseOp(std::string_view onnxType) {
  static constexpr PwOpInfo table[] = {
      {"Add", PwOp::Add, 2},     {"Sub", PwOp::Sub, 2},         {"Mul", PwOp::Mul, 2},
      {"Div", PwOp::Div, 2},     {"Pow", PwOp::Pow, 2},         {"Max", PwOp::Max, 2},
      {"Min", PwOp::Min, 2},     {"Neg", PwOp::Neg, 1},         {"Abs", PwOp::Abs, 1},
      {"Sqrt", PwOp::Sqrt, 1},   {"Reciprocal", PwOp::Recip, 1}, {"Tanh", PwOp::Tanh, 1},
      {"Sigmoid", PwOp::Sigmoid, 1}, {"Erf", PwOp::Erf, 1},     {"Exp", PwOp::Exp, 1},
      {"Log", PwOp::Log, 1},     {"Relu", PwOp::Relu, 1},       {"Where", PwOp::Where, 3}};
  for (const PwOpInfo &i : table)
    if (i.onnxType == onnxType)
      return &i;
  return nullptr;
}

/// The program of an octet::Pointwise op; throws Error naming the node when the
/// attributes are malformed (unknown op, wrong arity, forward references, limits).
PwProgram parsePointwise(const PlanOp &op);

/// One instruction's float32 arithmetic on the CPU (the single-op kernels use it too).
float applyPointwise(PwOp op, float a, float b, float c);
/// out[i] = applyPointwise(op, a[i], b[i], c[i]) for i < n, in one loop per op.
void applyPointwiseBlock(PwOp op, const float *a, const float *b, const float *c, float *out, int64_t n);

} // namespace octet::rt

#endif
