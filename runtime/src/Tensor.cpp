//===- Tensor.cpp ---------------------------------------------------------===//
#include "octet/runtime/Tensor.h"

#include <cmath>
#include <cstring>

namespace octet::rt {

namespace {
struct DTypeInfo {
  DType t;
  const char *name;
  size_t size;
  int onnx;
};
const DTypeInfo kInfo[] = {
    {DType::F32, "float32", 4, 1},      {DType::F64, "float64", 8, 11},   {DType::F16, "float16", 2, 10},
    {DType::BF16, "bfloat16", 2, 16},   {DType::I64, "int64", 8, 7},      {DType::I32, "int32", 4, 6},
    {DType::I16, "int16", 2, 5},        {DType::I8, "int8", 1, 3},        {DType::U8, "uint8", 1, 2},
    {DType::Bool, "bool", 1, 9},        {DType::F8E4M3FN, "float8e4m3fn", 1, 17},
    {DType::F8E5M2, "float8e5m2", 1, 19},
};
} // namespace

const char *dtypeName(DType t) {
  for (const auto &i : kInfo)
    if (i.t == t)
      return i.name;
  return "invalid";
}
DType dtypeFromName(const std::string &name) {
  for (const auto &i : kInfo)
    if (name == i.name)
      return i.t;
  return DType::Invalid;
}
size_t dtypeSize(DType t) {
  for (const auto &i : kInfo)
    if (i.t == t)
      return i.size;
  return 0;
}
bool isFp8(DType t) { return t == DType::F8E4M3FN || t == DType::F8E5M2; }
Fp8Format fp8FormatOf(DType t) { return t == DType::F8E5M2 ? Fp8Format::E5M2 : Fp8Format::E4M3FN; }
DType dtypeFromOnnx(int code) {
  for (const auto &i : kInfo)
    if (i.onnx == code)
      return i.t;
  return DType::Invalid;
}
int onnxCodeOf(DType t) {
  for (const auto &i : kInfo)
    if (i.t == t)
      return i.onnx;
  return 0;
}

int64_t numElements(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

int64_t checkedBytes(const Shape &s, size_t elementBytes) {
  int64_t n = int64_t(elementBytes);
  for (int64_t d : s)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return -1;
  return n;
}

std::string shapeString(const Shape &s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i)
    r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

double Tensor::getDouble(int64_t i) const {
  switch (dtype) {
  case DType::F32: return data<float>()[i];
  case DType::F64: return data<double>()[i];
  case DType::F16: return halfToFloat(data<uint16_t>()[i]);
  case DType::BF16: return bf16ToFloat(data<uint16_t>()[i]);
  case DType::I64: return double(data<int64_t>()[i]);
  case DType::I32: return data<int32_t>()[i];
  case DType::I16: return data<int16_t>()[i];
  case DType::I8: return data<int8_t>()[i];
  case DType::U8: return data<uint8_t>()[i];
  case DType::Bool: return data<uint8_t>()[i] ? 1.0 : 0.0;
  case DType::F8E4M3FN:
  case DType::F8E5M2: return fp8Decode(data<uint8_t>()[i], fp8FormatOf(dtype));
  case DType::Invalid: break;
  }
  throw Error("tensor of invalid element type");
}

int64_t Tensor::getInt(int64_t i) const {
  switch (dtype) {
  case DType::I64: return data<int64_t>()[i];
  case DType::I32: return data<int32_t>()[i];
  case DType::I16: return data<int16_t>()[i];
  case DType::I8: return data<int8_t>()[i];
  case DType::U8:
  case DType::Bool: return data<uint8_t>()[i];
  default: return int64_t(getDouble(i));
  }
}

std::vector<int64_t> Tensor::toInts() const {
  std::vector<int64_t> r(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    r[size_t(i)] = getInt(i);
  return r;
}

Tensor Tensor::castTo(DType t, bool saturate) const {
  Tensor r(t, shape);
  int64_t n = numel();
  if (t == dtype) {
    r.bytes = bytes;
    return r;
  }
  if (dtype == DType::BF16 && t == DType::F32) { // the common widening, exactly
    for (int64_t i = 0; i < n; ++i)
      r.data<float>()[i] = bf16ToFloat(data<uint16_t>()[i]);
    return r;
  }
  if (dtype == DType::F32 && t == DType::BF16) {
    const float *in = data<float>();
    uint16_t *out = r.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToBf16(in[i]);
    return r;
  }
  // FP8 codes widen exactly through their decode table (the GEMMs' operands, every step).
  if (isFp8(dtype) && (t == DType::F32 || t == DType::BF16)) {
    const float *table = fp8DecodeTable(fp8FormatOf(dtype));
    const uint8_t *in = data<uint8_t>();
    if (t == DType::F32) {
      float *out = r.data<float>();
      for (int64_t i = 0; i < n; ++i)
        out[i] = table[in[i]];
    } else { // every FP8 value is a BF16 value: the rounding is exact
      uint16_t *out = r.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i)
        out[i] = floatToBf16(table[in[i]]);
    }
    return r;
  }
  if (dtype == DType::F32 && isFp8(t)) {
    const float *in = data<float>();
    uint8_t *out = r.data<uint8_t>();
    Fp8Format f = fp8FormatOf(t);
    for (int64_t i = 0; i < n; ++i)
      out[i] = fp8Encode(in[i], f, saturate);
    return r;
  }
  bool intSrc = dtype == DType::I64 || dtype == DType::I32 || dtype == DType::I16 || dtype == DType::I8 ||
                dtype == DType::U8 || dtype == DType::Bool;
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
    case DType::F32: r.data<float>()[i] = float(getDouble(i)); break;
    case DType::F64: r.data<double>()[i] = getDouble(i); break;
    case DType::F16: r.data<uint16_t>()[i] = floatToHalf(float(getDouble(i))); break;
    case DType::BF16: r.data<uint16_t>()[i] = floatToBf16(float(getDouble(i))); break;
    case DType::I64: r.data<int64_t>()[i] = intSrc ? getInt(i) : int64_t(getDouble(i)); break;
    case DType::I32: r.data<int32_t>()[i] = int32_t(intSrc ? getInt(i) : int64_t(getDouble(i))); break;
    case DType::I16: r.data<int16_t>()[i] = int16_t(intSrc ? getInt(i) : int64_t(getDouble(i))); break;
    case DType::I8: r.data<int8_t>()[i] = int8_t(intSrc ? getInt(i) : int64_t(getDouble(i))); break;
    case DType::U8: r.data<uint8_t>()[i] = uint8_t(intSrc ? getInt(i) : int64_t(getDouble(i))); break;
    case DType::Bool: r.data<uint8_t>()[i] = intSrc ? getInt(i) != 0 : getDouble(i) != 0.0; break;
    case DType::F8E4M3FN:
    case DType::F8E5M2:
      r.data<uint8_t>()[i] = fp8Encode(float(getDouble(i)), fp8FormatOf(t), saturate);
      break;
    case DType::Invalid: throw Error("cast to an invalid element type");
    }
  }
  return r;
}

} // namespace octet::rt
