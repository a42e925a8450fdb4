//===- EwMath.h - Float arithmetic of elementwise ops, for nvcc and NVRTC --===//
//
// The elementwise op codes and ewFloat, the float32 arithmetic of each op.
// DeviceKernels.cu includes this file; the Pointwise code generator
// (PointwiseJit.cpp) puts its text at the top of every translation unit it
// compiles with NVRTC, so a generated kernel computes exactly what the
// interpreter kernel computes. Keep it free of #include: NVRTC sees it alone.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_CUDA_EWMATH_H
#define OCTET_CUDA_EWMATH_H

namespace octet::rt::cuda::dev {

enum class Ew : int {
  Add, Sub, Mul, Div, Pow, Max, Min,         // binary arithmetic
  Eq, Lt, Le, Gt, Ge, And, Or,               // comparisons and logic (bool out)
  Not, Neg, Abs, Sqrt, Recip, Tanh, Sigmoid, // unary
  Erf, Exp, Log, Sin, Cos, Floor, Ceil, Relu, Gelu, GeluTanh,
  Where, // in0 ? in1 : in2
  Clip,  // min(max(x, in1), in2), NaN kept; missing bounds are +-inf
  Copy,  // conversion to the output type (Cast, CastLike, Expand)
  AddBias, // in0 + (in1 + in2): a residual Add of a GEMM result whose bias the GEMM left out
};

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
__device__ __forceinline__ float ewNan() { return __int_as_float(0x7fc00000); }

/// BF16 storage, bit for bit as the CPU reference (floatToBf16 in runtime/src/Fp8.cpp): round to
/// nearest even, a NaN kept quiet; widening is exact.
/// The rounding is the hardware's conversion (one instruction where the integer formula
/// (b + 0x7FFF + lsb) >> 16 took about ten); a NaN does not go through it but keeps its sign and
/// its payload's top bits, with the quiet bit set.
__device__ __forceinline__ unsigned short bf16Bits(float f) {
  if (f != f)
    return (unsigned short)((__float_as_uint(f) >> 16) | 0x40u);
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float bf16Float(unsigned short h) { return __uint_as_float(unsigned(h) << 16); }
__device__ __forceinline__ float bf16Round(float f) { return bf16Float(bf16Bits(f)); }

/// GELU as the CPU reference computes it, each product and sum rounded on its own: nvcc's default
/// --fmad=true would contract x + c x^3 into an FMA where NVRTC's --fmad=false does not, so the
/// generated kernels and nvcc's would differ in the last bit.
__device__ __forceinline__ float geluF(float x, bool tanhApprox) {
  if (tanhApprox) {
    float cube = __fmul_rn(__fmul_rn(__fmul_rn(0.044715f, x), x), x);
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, tanhf(__fmul_rn(0.7978845608028654f, __fadd_rn(x, cube)))));
  }
  return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, erff(__fmul_rn(x, 0.7071067811865476f))));
}

__device__ __forceinline__ float ewFloat(Ew op, float a, float b, float c, bool hasLo, bool hasHi) {
  switch (op) {
  // Rounded operations, never contracted into an FMA, and written as geluF writes them: a
  // generated kernel whose programs compute geluF's expression (the GELU gradient's, octet's
  // autodiff) computes it once.
  case Ew::Add: return __fadd_rn(a, b);
  case Ew::Sub: return __fsub_rn(a, b);
  case Ew::Mul: return __fmul_rn(a, b);
  case Ew::Div: return a / b;
  case Ew::Pow: return powf(a, b);
  case Ew::Max: return isnan(a) || isnan(b) ? ewNan() : fmaxf(a, b);
  case Ew::Min: return isnan(a) || isnan(b) ? ewNan() : fminf(a, b);
  case Ew::Eq: return a == b;
  case Ew::Lt: return a < b;
  case Ew::Le: return a <= b;
  case Ew::Gt: return a > b;
  case Ew::Ge: return a >= b;
  case Ew::And: return a != 0.0f && b != 0.0f;
  case Ew::Or: return a != 0.0f || b != 0.0f;
  case Ew::Not: return a == 0.0f;
  case Ew::Neg: return -a;
  case Ew::Abs: return fabsf(a);
  case Ew::Sqrt: return sqrtf(a);
  case Ew::Recip: return 1.0f / a;
  case Ew::Tanh: return tanhf(a);
  case Ew::Sigmoid: return 1.0f / (1.0f + expf(-a));
  case Ew::Erf: return erff(a);
  case Ew::Exp: return expf(a);
  case Ew::Log: return logf(a);
  case Ew::Sin: return sinf(a);
  case Ew::Cos: return cosf(a);
  case Ew::Floor: return floorf(a);
  case Ew::Ceil: return ceilf(a);
  case Ew::Relu: return a > 0.0f ? a : 0.0f;
  case Ew::Gelu: return geluF(a, false);
  case Ew::GeluTanh: return geluF(a, true);
  case Ew::Where: return a != 0.0f ? b : c;
  case Ew::Clip:
    if (isnan(a))
      return a;
    if (hasLo)
      a = fmaxf(a, b);
    if (hasHi)
      a = fminf(a, c);
    return a;
  case Ew::Copy: return a;
  case Ew::AddBias: return __fadd_rn(a, __fadd_rn(b, c));
  }
  return a;
}
#endif

} // namespace octet::rt::cuda::dev

#endif
