//===- Weights.cpp - Trained weights back to PyTorch ----------------------===//
#include "octet/runtime/Weights.h"

#include "Json.h"

#include <algorithm>
#include <cstring>

namespace octet::rt {

std::string weightsUnavailable(const Plan &p) {
  if (std::none_of(p.roles.begin(), p.roles.end(), [](auto &r) { return isWeightRole(r.second); }))
    return "the plan trains no weights; compile it with fp8-opt --train";
  for (auto &[id, role] : p.roles)
    if (role == "master_shard" || role == "weight_shard")
      return std::string("the plan shards its ") +
             (role == "master_shard" ? "master weights across ranks (MS-AMP O3 with --shard-optimizer)"
                                     : "weights across ranks (--shard-parameters)") +
             ", so no rank holds them whole; write a checkpoint (--checkpoint) and join its ranks' files with "
             "python -m octet.weights PLAN CHECKPOINT OUT.safetensors";
  return "";
}

std::vector<TensorSource> trainedWeights(const Runner &ex) {
  const Plan &p = ex.plan();
  std::vector<TensorSource> out;
  for (auto &[id, role] : p.roles) {
    if (role != "weight" && role != "master_weight")
      continue;
    const PlanValue &v = p.values[size_t(id)];
    out.push_back({v.name, DType::F32, v.shape, [&ex, name = v.name] {
                     TensorPtr t = ex.stateTensor(name);
                     if (!t)
                       throw Error("--save-weights: the plan's weight '" + name + "' is not in the runner's state");
                     return t->dtype == DType::F32 ? t : std::make_shared<Tensor>(t->castTo(DType::F32));
                   }});
  }
  std::sort(out.begin(), out.end(), [](auto &a, auto &b) { return a.name < b.name; });
  return out;
}

static const char *safetensorsDtype(DType t) {
  switch (t) {
  case DType::F32: return "F32";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::F64: return "F64";
  case DType::I64: return "I64";
  case DType::I32: return "I32";
  case DType::I16: return "I16";
  case DType::I8: return "I8";
  case DType::U8: return "U8";
  case DType::Bool: return "BOOL";
  default: return nullptr;
  }
}

void writeSafetensors(const std::string &path, const std::vector<TensorSource> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  JsonOut header = JsonOut::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const TensorSource &t : tensors) {
    const char *dtype = safetensorsDtype(t.dtype);
    if (!dtype)
      throw Error(path + ": tensor '" + t.name + "' is " + dtypeName(t.dtype) + ", which safetensors does not hold");
    size_t bytes = size_t(numElements(t.shape)) * dtypeSize(t.dtype);
    header[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = dumpJson(header);
  json.append((8 - json.size() % 8) % 8, ' '); // the data starts 8-byte aligned (the format's own writers pad so)
  std::string head(8, '\0');
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    head[size_t(i)] = char((n >> (8 * i)) & 0xFF); // little-endian
  head += json;
  writeFileAtomically(path, [&](const std::function<void(const void *, size_t)> &put) {
    put(head.data(), head.size());
    for (const TensorSource &t : tensors) {
      TensorPtr v = t.fetch();
      if (!v || v->dtype != t.dtype || v->shape != t.shape)
        throw Error("tensor '" + t.name + "' is not the " + std::string(dtypeName(t.dtype)) + " " +
                    shapeString(t.shape) + " its header says");
      put(v->bytes.data(), v->bytes.size());
    }
  });
}

} // namespace octet::rt
