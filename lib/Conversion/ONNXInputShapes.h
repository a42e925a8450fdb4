//===- ONNXInputShapes.h - Symbolic input dimensions made static -*- C++ -*-===//
//
// Private to lib/Conversion. An export with dynamic axes (torch.onnx.export's dynamic_shapes,
// dynamic_axes) names its symbolic dimensions (dim_param: "batch", "s0"). fp8-opt --input-shape
// NAME=AxB gives the inputs' shapes; each symbol then has one value, which every type that names
// it takes, and the importer's shape folding makes the rest of the graph static.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_LIB_CONVERSION_ONNXINPUTSHAPES_H
#define OCTET_LIB_CONVERSION_ONNXINPUTSHAPES_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class GraphProto;
}

namespace octet::detail {

/// The static shapes `shapes` gives the graph's inputs: each input's dims (`inputs`) and the value
/// of every symbol they name (`symbols`). Emits a one-line error at `loc` and fails on a name that
/// is no input, a shape of another rank, a dimension the model fixes otherwise, or one symbol given
/// two values.
mlir::LogicalResult bindInputShapes(const onnx::GraphProto &graph,
                                    const std::map<std::string, std::vector<int64_t>> &shapes, mlir::Location loc,
                                    llvm::StringMap<std::vector<int64_t>> &inputs,
                                    llvm::StringMap<int64_t> &symbols);

/// The value of a symbolic dimension: a bound symbol, or an expression of bound symbols as the
/// dynamo exporter writes them ("seq*batch", "2*s0 + 1", "Max(1, s1)", "s0//2"); nullopt when it
/// names an unbound symbol or does not parse.
std::optional<int64_t> evaluateDim(llvm::StringRef expr, const llvm::StringMap<int64_t> &symbols);

} // namespace octet::detail

#endif
