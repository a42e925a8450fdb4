//===- MemoryBudget.cpp - fp8-opt --memory-budget ---------------------------===//
#include "octet/Tools/MemoryBudget.h"

#include "octet/Dialect/ONNX/IR/ONNX.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
namespace ox = octet::onnx_dialect;

int64_t octet::stateBytes(ModuleOp module) {
  int64_t total = 0;
  module.walk([&](ox::InitializerOp init) {
    auto t = init.getType().dyn_cast<RankedTensorType>();
    if (!t || !t.hasStaticShape())
      return;
    unsigned bits = t.getElementType().isIntOrFloat() ? t.getElementType().getIntOrFloatBitWidth() : 8;
    total += t.getNumElements() * int64_t((bits + 7) / 8);
  });
  return total;
}

bool octet::parseByteCount(const std::string &text, int64_t &bytes) {
  const char *s = text.c_str();
  char *end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || !std::isfinite(v) || v <= 0)
    return false;
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b'))
    unit.pop_back();
  double scale = 1;
  if (!unit.empty()) {
    bool binary = unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I');
    if (unit.size() > 2 || (unit.size() == 2 && !binary))
      return false;
    int power = 0;
    switch (std::toupper(static_cast<unsigned char>(unit[0]))) {
    case 'K': power = 1; break;
    case 'M': power = 2; break;
    case 'G': power = 3; break;
    case 'T': power = 4; break;
    default: return false;
    }
    scale = std::pow(binary ? 1024.0 : 1000.0, power);
  }
  double b = v * scale;
  if (b < 1 || b > 9.0e18)
    return false;
  bytes = int64_t(b);
  return true;
}

std::string octet::describeBytes(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%lld bytes (%.2f GiB)", (long long)bytes, double(bytes) / double(int64_t(1) << 30));
  return buf;
}
