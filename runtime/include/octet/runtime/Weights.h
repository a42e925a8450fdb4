//===- Weights.h - Trained weights back to PyTorch ------------*- C++ -*-===//
//
// fp8-run --save-weights: the parameters a training plan trains, under their initializer names
// (for a torch.onnx.export of a module, its state-dict names), in float32 (MS-AMP's FP16 weights
// or masters widened exactly), as a .safetensors file that `model.load_state_dict(
// safetensors.torch.load_file(path))` reads.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_WEIGHTS_H
#define OCTET_RUNTIME_WEIGHTS_H

#include "octet/runtime/Executor.h"
#include "octet/runtime/Npz.h"

#include <map>
#include <string>

namespace octet::rt {

/// Why the plan's weights cannot be written whole by one process ("" when they can): a plan whose
/// masters are sharded across ranks (MS-AMP O3 with fp8-opt --shard-optimizer).
std::string weightsUnavailable(const Plan &p);

/// The trained parameters (roles weight and master_weight) in float32, sorted by name: each taken
/// from the runner (off the device) and widened when a writer reaches it.
std::vector<TensorSource> trainedWeights(const Runner &ex);

/// Writes `tensors` as a .safetensors file (an 8-byte header length, the JSON header with each
/// tensor's dtype, shape and byte range and the `metadata`, then the bytes), atomically, fetching
/// one tensor at a time.
void writeSafetensors(const std::string &path, const std::vector<TensorSource> &tensors,
                      const std::map<std::string, std::string> &metadata);

} // namespace octet::rt

#endif
