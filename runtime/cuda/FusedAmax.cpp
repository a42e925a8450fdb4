//===- FusedAmax.cpp - Dynamic scaling's amaxes in fewer passes -------------===//
//
// The CUDA executor's load-time fusions of dynamic scaling (torchao's `ao`, MS-AMP), as the plan
// groups them: an amax taken by the op that stores its input (producer_amax), and a scale
// computed where its amax finishes (amax_scale). Each keeps the ops' own programs as its parts,
// which check() runs one by one.
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"

namespace octet::rt::cuda::detail {

bool CudaExecutor::overlapsOperands(const void *p, size_t bytes, size_t op) {
  const PlanOp &o = plan_.ops[op];
  for (const std::vector<int> *ids : {&o.inputs, &o.outputs})
    for (int id : *ids)
      if (id >= 0 && bytesOverlap(p, bytes, devicePtr(id),
                                  size_t(numElements(shapeOf(id))) * dtypeSize(typeOf(id))))
        return true;
  return false;
}

/// The plan's producer_amax groups (octet-fuse-producer-amax): the producer's pass also takes max
/// |y| of what it stores into the amax's result, and the amax reads nothing. Producers: a GELU
/// (its kernel's amax variant), a Pointwise program (a generated kernel with the amax, or, without
/// NVRTC, the program and the amax apart), a LayerNorm gradient's dX (its row kernel's). The pair
/// runs as it is where the producer runs otherwise (a folded bias, a fused chain, unaligned
/// pointers, rows too long), a program other than views runs between them, or the amax's result
/// shares bytes with the producer's operands (the arena may give it a buffer that dies at the
/// producer). check() runs the ops as they were.
void CudaExecutor::fuseProducerAmax() {
  Step nothing = [](cudaStream_t) { return std::string(); };
  std::map<int64_t, size_t> producerAt; // the plan's group -> the program of its producer
  for (size_t k = 0; k < program_.size(); ++k) {
    int64_t group = planGroup(k, "producer_amax");
    if (group < 0)
      continue;
    auto a = amaxes_.find(program_[k].op);
    if (a == amaxes_.end()) {
      producerAt[group] = k;
      continue;
    }
    auto g = producerAt.find(group);
    if (g == producerAt.end()) {
      ++fusions_["producer amax not applied"];
      continue;
    }
    const size_t pp = g->second, pop = program_[pp].op;
    producerAt.erase(g);
    const AmaxOp am = a->second;
    bool between = !program_[pp].parts.empty() || !program_[k].parts.empty() ||
                   overlapsOperands(am.out, sizeof(float), pop);
    for (size_t j = pp + 1; j < k; ++j)
      between = between || !quietView(j);
    float *out = am.out;
    Step fused;
    std::string what;
    if (auto ge = geluSources_.find(pop); !between && ge != geluSources_.end()) {
      const GeluOp gl = ge->second;
      const void *x = gl.x;
      void *y = devicePtr(gl.y);
      if (am.xp == y && am.n == gl.n && !gl.bias &&
          (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) % 16 == 0) {
        const bool bf16 = gl.bf16, tanhApprox = gl.tanhApprox;
        const int64_t n = gl.n;
        fused = [=](cudaStream_t s) { return dev::gelu(x, y, bf16, n, tanhApprox, s, out); };
        what = "GELU takes its amax";
      }
    } else if (auto pw = pointwise_.find(pop); !between && jit_ && pw != pointwise_.end()) {
      const dev::PwArgs pa = pw->second;
      int h = pa.out == am.xp && pa.n == am.n ? jit_->addChain({pa}, {}, true) : -1;
      if (h >= 0) {
        std::vector<Step> apart = program_[pp].steps;
        apart.push_back(
            [am](cudaStream_t s) { return dev::amaxRows(am.xp, am.type, 1, am.n, am.out, s); });
        fused = generatedStep(
            {pa}, apart,
            [this, h, out](const std::vector<const dev::PwArgs *> &ptrs, cudaStream_t s) {
              return jit_->launchChain(h, ptrs, s, out);
            });
        what = "Pointwise takes its amax";
      }
    } else if (auto lg = layerNormGrads_.find(pop); !between && lg != layerNormGrads_.end()) {
      const LayerNormGradOp l = lg->second;
      const auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
      if (l.dx && am.xp == l.dx && am.n == l.rows * l.n && dev::layerNormStatsFit(l.n) &&
          aligned(l.x) && aligned(l.dy) && aligned(l.dx) && aligned(l.scale) && aligned(l.dxIn)) {
        fused = [l, out](cudaStream_t s) {
          return dev::layerNormGrad(l.x, l.scale, l.dy, l.dxIn, l.dx, l.bf, l.dScale, l.dB,
                                    reinterpret_cast<float *>(*l.partials), l.rows, l.n, l.eps, s,
                                    out, l.rms);
        };
        what = "LayerNorm gradient takes its amax";
      }
    }
    if (!fused) {
      ++fusions_["producer amax not applied"];
      continue;
    }
    replaceProgram(pp, fused);
    replaceProgram(k, nothing);
    ++fusions_[what];
  }
}

/// The plan's amax_scale groups (octet-fuse-amax-scale: a per-tensor fp8.amax and the
/// fp8.dynamic_scale that reads it, next to each other): the amax's launch finishes with the scale
/// (amaxScaled) and the scale's program runs nothing. A pair whose programs are apart, whose scale
/// reads another value or more than one, or whose results share bytes with the amax's input runs
/// as two launches ("amax scale not applied").
void CudaExecutor::fuseAmaxScale() {
  Step nothing = [](cudaStream_t) { return std::string(); };
  std::map<int64_t, size_t> amaxAt; // the plan's group -> the program of its amax
  for (size_t k = 0; k < program_.size(); ++k) {
    int64_t group = planGroup(k, "amax_scale");
    if (group < 0 || passAmaxes_.count(program_[k].op)) // a cast pass took the pair
      continue;
    if (amaxes_.count(program_[k].op)) {
      amaxAt[group] = k;
      continue;
    }
    auto d = dynamicScales_.find(program_[k].op);
    auto a = amaxAt.find(group);
    if (d == dynamicScales_.end() || a == amaxAt.end()) {
      ++fusions_["amax scale not applied"];
      continue;
    }
    const size_t ap = a->second;
    amaxAt.erase(a);
    const AmaxOp am = amaxes_.at(program_[ap].op);
    const DynamicScaleOp ds = d->second;
    bool between = false;
    for (size_t j = ap + 1; j < k; ++j)
      between = between || !quietView(j);
    size_t xBytes = size_t(am.n) * dtypeSize(DType(am.type));
    if (between || !program_[ap].parts.empty() || ds.amax != am.out || ds.n != 1 ||
        bytesOverlap(ds.scale, sizeof(float), am.xp, xBytes) ||
        bytesOverlap(ds.scaleInv, sizeof(float), am.xp, xBytes)) {
      ++fusions_["amax scale not applied"];
      continue;
    }
    replaceProgram(ap, [am, ds](cudaStream_t s) {
      return dev::amaxScaled(am.xp, am.type, am.n, am.out, ds.fmax, ds.eps, ds.pow2, ds.scale,
                             ds.scaleInv, s);
    });
    replaceProgram(k, nothing);
    ++fusions_["amax takes its scale"];
  }
}

} // namespace octet::rt::cuda::detail
