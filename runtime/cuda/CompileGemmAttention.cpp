//===- CompileGemmAttention.cpp - The CUDA executor's products: GEMMs and attention ===//
//
// MatMul and Gemm through cuBLAS (row-major, batched), fp8.gemm through cuBLASLt (operand
// transposes, scales, bias and amax epilogues) and octet::Attention/AttentionGrad through cuDNN's
// fused SDPA or Attention.cu's kernels.
//
//===----------------------------------------------------------------------===//
#include "CudaExecutorImpl.h"

#include <type_traits>

namespace octet::rt::cuda::detail {

/// cuBLAS on row-major data: C[M,N] = op(A) op(B), batched.
struct BlasCall {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0, batch = 1;
  const void *A = nullptr, *B = nullptr;
  void *C = nullptr;
  const void **ptrs = nullptr; // device [3][batch] (A, B, C) when strides do not describe the batch
  cudaDataType_t type = CUDA_R_32F;
  float alpha = 1, beta = 0;
};

std::string runBlas(cublasHandle_t h, const BlasCall &c) {
  const cublasComputeType_t ct = CUBLAS_COMPUTE_32F;
  cublasOperation_t opA = c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = c.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t st;
  if (c.ptrs)
    st = cublasGemmBatchedEx(h, opB, opA, int(c.N), int(c.M), int(c.K), &c.alpha, c.ptrs + c.batch, c.type,
                             int(c.ldb), c.ptrs, c.type, int(c.lda), &c.beta, const_cast<void **>(c.ptrs + 2 * c.batch),
                             c.type, int(c.ldc), int(c.batch), ct, CUBLAS_GEMM_DEFAULT);
  else
    st = cublasGemmStridedBatchedEx(h, opB, opA, int(c.N), int(c.M), int(c.K), &c.alpha, c.B, c.type, int(c.ldb),
                                    c.strideB, c.A, c.type, int(c.lda), c.strideA, &c.beta, c.C, c.type, int(c.ldc),
                                    c.strideC, int(c.batch), ct, CUBLAS_GEMM_DEFAULT);
  return st == CUBLAS_STATUS_SUCCESS ? "" : "cuBLAS GEMM failed (status " + std::to_string(int(st)) + ")";
}

cudaDataType_t blasType(const PlanOp &op, DType t) {
  switch (t) {
  case DType::F32: return CUDA_R_32F;
  case DType::F16: return CUDA_R_16F;
  case DType::BF16: return CUDA_R_16BF;
  default:
    throw Error("node '" + op.name + "' (" + op.type + "): " + dtypeName(t) +
                " GEMMs are not supported (float32, float16, bfloat16)");
  }
}

void CudaExecutor::compileMatMul(const PlanOp &op, std::vector<Step> &out) {
  int a = op.inputs[0], b = op.inputs[1], o = op.outputs[0];
  DType t = typeOf(a);
  if (typeOf(b) != t || plan_.values[size_t(o)].dtype != t)
    fail(op, "operands and result must have one element type");
  Shape as = shapeOf(a), bs = shapeOf(b);
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  if (as.size() < 2 || bs.size() < 2 || as.back() != bs[bs.size() - 2])
    fail(op, "shapes " + shapeString(as) + " and " + shapeString(bs) + " do not multiply");
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  size_t rank = std::max(ab.size(), bb.size());
  Shape batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + ab.size() >= rank ? ab[i + ab.size() - rank] : 1;
    int64_t db = i + bb.size() >= rank ? bb[i + bb.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      fail(op, "batch dimensions do not broadcast");
    batch[i] = std::max(da, db);
  }
  BlasCall c;
  c.type = blasType(op, t);
  c.A = devicePtr(a);
  c.B = devicePtr(b);
  c.C = devicePtr(o);
  c.N = N;
  c.K = K;
  c.lda = K;
  c.ldb = N;
  c.ldc = N;
  int64_t nb = numElements(batch);
  if (numElements(bb) == 1) { // B shared by every batch: one GEMM with the batch folded into M
    c.M = M * numElements(ab);
    if (numElements(ab) != nb)
      fail(op, "internal: batch mismatch");
  } else {
    c.M = M;
    c.batch = nb;
    std::vector<int64_t> sa = broadcastStrides(ab, batch), sb = broadcastStrides(bb, batch);
    std::vector<int64_t> offA(static_cast<size_t>(nb)), offB(static_cast<size_t>(nb));
    std::vector<int64_t> bstr = contiguousStrides(batch);
    for (int64_t i = 0; i < nb; ++i) {
      int64_t rem = i, oa = 0, ob = 0;
      for (size_t d = 0; d < rank; ++d) {
        int64_t q = rem / bstr[d];
        rem %= bstr[d];
        oa += q * sa[d];
        ob += q * sb[d];
      }
      offA[size_t(i)] = oa * M * K;
      offB[size_t(i)] = ob * K * N;
    }
    auto arithmetic = [&](const std::vector<int64_t> &v, int64_t &stride) {
      stride = v.size() > 1 ? v[1] - v[0] : 0;
      for (size_t i = 1; i < v.size(); ++i)
        if (v[i] - v[i - 1] != stride)
          return false;
      return true;
    };
    c.strideC = M * N;
    if (!arithmetic(offA, c.strideA) || !arithmetic(offB, c.strideB)) {
      size_t es = dtypeSize(t);
      std::vector<const void *> ptrs(size_t(3 * nb));
      for (int64_t i = 0; i < nb; ++i) {
        ptrs[size_t(i)] = static_cast<const char *>(c.A) + offA[size_t(i)] * int64_t(es);
        ptrs[size_t(nb + i)] = static_cast<const char *>(c.B) + offB[size_t(i)] * int64_t(es);
        ptrs[size_t(2 * nb + i)] = static_cast<char *>(c.C) + i * M * N * int64_t(es);
      }
      void *d = alloc(ptrs.size() * sizeof(void *), "launch arguments");
      cudaCheck(cudaMemcpy(d, ptrs.data(), ptrs.size() * sizeof(void *), cudaMemcpyHostToDevice), "upload");
      c.ptrs = static_cast<const void **>(d);
    }
  }
  out.push_back([this, c](cudaStream_t) { return runBlas(blas_, c); });
}

void CudaExecutor::compileGemm(const PlanOp &op, std::vector<Step> &out) {
  int a = op.inputs[0], b = op.inputs[1], o = op.outputs[0];
  DType t = typeOf(a);
  Shape as = shapeOf(a), bs = shapeOf(b);
  if (as.size() != 2 || bs.size() != 2 || typeOf(b) != t)
    fail(op, "Gemm takes 2-D A and B of one element type");
  BlasCall c;
  c.type = blasType(op, t);
  c.ta = attrInt(op, "transA", 0);
  c.tb = attrInt(op, "transB", 0);
  c.M = c.ta ? as[1] : as[0];
  c.K = c.ta ? as[0] : as[1];
  c.N = c.tb ? bs[0] : bs[1];
  if ((c.tb ? bs[1] : bs[0]) != c.K)
    fail(op, "inner dimensions differ");
  c.lda = as[1];
  c.ldb = bs[1];
  c.ldc = c.N;
  c.A = devicePtr(a);
  c.B = devicePtr(b);
  c.C = devicePtr(o);
  c.alpha = float(attrFloat(op, "alpha", 1.0));
  float beta = float(attrFloat(op, "beta", 1.0));
  if (has(op, 2) && beta != 0.0f) {
    dev::EwArgs e;
    e.op = dev::Ew::Copy;
    e.nIn = 1;
    e.in[0] = devicePtr(op.inputs[2]);
    e.inType[0] = int(typeOf(op.inputs[2]));
    Shape cs = shapeOf(op.inputs[2]), os{c.M, c.N};
    if (cs.size() > 2)
      fail(op, "C does not broadcast to [M, N]");
    e.inStr[0] = stridesOf(broadcastStrides(cs, os));
    e.out = c.C;
    e.outType = int(t);
    e.shape = dimsOf(os);
    e.n = c.M * c.N;
    out.push_back([e](cudaStream_t s) { return dev::elementwise(e, s); });
    c.beta = beta;
  }
  out.push_back([this, c](cudaStream_t) { return runBlas(blas_, c); });
}


void CudaExecutor::compileFp8Gemm(const PlanOp &op, std::vector<Step> &out) {
  if (has(op, 5))
    fail(op, "an FP8 output (d_scale) is not supported");
  int qa = op.inputs[0], qb = op.inputs[1], sa = op.inputs[2], sb = op.inputs[3], o = op.outputs[0];
  DType ta = typeOf(qa), tb = typeOf(qb), ot = plan_.values[size_t(o)].dtype;
  if (!isFp8(ta) || !isFp8(tb))
    fail(op, "GEMM operands must be FP8");
  bool transA = attrInt(op, "transpose_a", 0), transB = attrInt(op, "transpose_b", 0);
  Shape as = shapeOf(qa), bs = shapeOf(qb);
  if (bs.size() != 2 || (transA && as.size() != 2) || as.empty())
    fail(op, "operand ranks are not [.., K] x [K, N]");
  int64_t K = transA ? as[0] : as.back(), M = numElements(as) / K;
  int64_t N = transB ? bs[0] : bs[1], Kb = transB ? bs[1] : bs[0];
  if (K != Kb)
    fail(op, "inner dimensions differ: " + std::to_string(K) + " vs " + std::to_string(Kb));
  int64_t nsa = numElements(shapeOf(sa)), nsb = numElements(shapeOf(sb));
  bool rowA = nsa != 1, colB = nsb != 1;
  if ((rowA && nsa != M) || (colB && nsb != N))
    fail(op, "scale_inv shapes fit neither per tensor nor per row");
  if (ta == DType::F8E5M2 && tb == DType::F8E5M2)
    fail(op, "E5M2 x E5M2 has no FP8 tensor-core GEMM; make one operand E4M3");
  if (K % 16 || N % 16)
    fail(op, "FP8 GEMMs need K and N multiples of 16 (K=" + std::to_string(K) + ", N=" + std::to_string(N) +
                 "); exclude this layer from the recipe");
  bool fast = attrStr(op, "accumulation", "split") == "fast";
  bool withAmax = op.outputs.size() > 1 && op.outputs[1] >= 0;
  bool hasBias = has(op, 4);
  // Scratch layout: [A as [M,K]] [B as [N,K]] [float32 accumulator [M,N]].
  auto align = [](size_t v) { return (v + 255) / 256 * 256; };
  size_t offA = 0, offB = align(transA ? size_t(M * K) : 0);
  size_t offAcc = offB + align(transB ? 0 : size_t(N * K));
  cuda::GemmDesc desc;
  desc.M = M, desc.N = N, desc.K = K;
  desc.fa = fp8FormatOfType(ta), desc.fb = fp8FormatOfType(tb);
  desc.fastAccum = fast;
  auto withBias = [&](cuda::GemmDesc d, bool bf16, cuda::GemmDesc::Bias b) {
    d.dBf16 = bf16;
    d.bias = b;
    return d;
  };
  // Rowwise scales (torchao's rowwise recipes): cuBLASLt's outer-vector mode scales the product
  // in its epilogue where it has an algorithm for the GEMM, else the epilogue kernel below does.
  bool vector = rowA || colB;
  cuda::GemmDesc vec = desc;
  vec.rowScalesA = rowA, vec.colScalesB = colB;
  bool resultType = ot == DType::F32 || ot == DType::BF16;
  bool vectorScaled =
      vector && resultType && fp8_->supports(withBias(vec, ot == DType::BF16, cuda::GemmDesc::Bias::None)).empty();
  // Bias in cuBLASLt's epilogue: of the result's type, N values, nothing else in the epilogue kernel.
  bool biasN = hasBias && numElements(shapeOf(op.inputs[4])) == N && !withAmax && typeOf(op.inputs[4]) == ot;
  // A BF16 result with a BF16 bias (fp8-opt --activation-precision=bf16): cuBLASLt's epilogue adds it.
  bool epilogueBias = biasN && ot == DType::BF16 && (!vector || vectorScaled) &&
                      fp8_->supports(withBias(vector ? vec : desc, true, cuda::GemmDesc::Bias::BF16)).empty();
  // accumulate (input 6): D = C + A x B in cuBLASLt's epilogue (beta = 1), C read where it lies
  // (the plan may give D C's buffer); with a float32 bias (a residual Add folded into the GEMM,
  // octet-fold-residual-adds), cuBLASLt's epilogue adds it where it has an algorithm for that,
  // else a pass over D after the GEMM.
  bool accumulate = has(op, 6);
  bool accBiasF32 = accumulate && biasN && ot == DType::F32 && !vector;
  bool epilogueBiasF32 = accBiasF32 && fp8_->supports(withBias(desc, false, cuda::GemmDesc::Bias::F32)).empty();
  bool direct = (!vector || vectorScaled) && (!hasBias || epilogueBias || accBiasF32) && !withAmax && resultType;
  if (accumulate && (!direct || vector || ot != DType::F32 || typeOf(op.inputs[6]) != DType::F32 ||
                     numElements(shapeOf(op.inputs[6])) != M * N))
    fail(op, "accumulate needs per-tensor scales, a float32 result and a float32 C of its shape");
  if (vector)
    ++fusions_[direct ? "rowwise GEMMs scaled by cuBLASLt" : "rowwise GEMMs scaled in an epilogue pass"];
  const void *C = accumulate ? devicePtr(op.inputs[6]) : nullptr;
  bool accInOut = ot == DType::F32;
  size_t need = offAcc + (direct || accInOut ? 0 : align(size_t(M * N) * 4));
  char *const *sp = scratch(need);
  const uint8_t *A = static_cast<const uint8_t *>(devicePtr(qa)), *B = static_cast<const uint8_t *>(devicePtr(qb));
  const float *SA = static_cast<const float *>(devicePtr(sa)), *SB = static_cast<const float *>(devicePtr(sb));
  void *D = devicePtr(o);
  const void *bias = hasBias ? devicePtr(op.inputs[4]) : nullptr;
  int biasType = hasBias ? int(typeOf(op.inputs[4])) : 0;
  float *amax = withAmax ? static_cast<float *>(devicePtr(op.outputs[1])) : nullptr;
  // The GEMM without its bias, for a reader that adds it (octet-fold-gemm-bias): rowwise scales
  // need cuBLASLt's outer-vector mode for that (else foldGemmBias() counts the fold not applied).
  if (hasBias && !accumulate && (!vector || vectorScaled) && !withAmax && ot == DType::F32 &&
      biasType == int(DType::F32) && !transA && transB && numElements(shapeOf(op.inputs[4])) == N)
    gemmBias_[size_t(&op - plan_.ops.data())] = {
        [=](cudaStream_t s) {
          cuda::GemmOperands g;
          g.A = A, g.B = B, g.aScaleInv = SA, g.bScaleInv = SB, g.D = D;
          return fp8_->run(vector ? vec : desc, g, s);
        },
        static_cast<const float *>(bias), N, D, o, vector};
  // The call cuBLASLt makes: direct, D in the result's type (with the bias where its epilogue adds
  // it); else a float32 product (scaled unless the scales are vectors) for the epilogue kernel.
  cuda::GemmDesc call = direct ? withBias(vector ? vec : desc, ot == DType::BF16,
                                          epilogueBias      ? cuda::GemmDesc::Bias::BF16
                                          : epilogueBiasF32 ? cuda::GemmDesc::Bias::F32
                                                            : cuda::GemmDesc::Bias::None)
                               : desc;
  out.push_back([=](cudaStream_t s) -> std::string {
    // cuBLASLt's FP8 kernels need both operands K-contiguous ("TN"): transpose the others.
    auto transposed = [&](const uint8_t *src, size_t off, int64_t rows, int64_t cols, std::string &err) {
      err = dev::stridedCopy(byteTranspose(src, *sp + off, cols, rows), s); // src [cols, rows] -> [rows, cols]
      return reinterpret_cast<const uint8_t *>(*sp + off);
    };
    cuda::GemmOperands g;
    g.A = A, g.B = B, g.aScaleInv = SA, g.bScaleInv = SB, g.D = D;
    std::string err;
    if (transA && (g.A = transposed(A, offA, M, K, err), !err.empty()))
      return err;
    if (!transB && (g.B = transposed(B, offB, N, K, err), !err.empty()))
      return err;
    g.bias = call.bias != cuda::GemmDesc::Bias::None ? bias : nullptr;
    g.accumulate = C != nullptr, g.C = C;
    if (direct && accBiasF32 && !epilogueBiasF32) { // D = C + A x B, then the bias over D
      if (std::string e = fp8_->run(call, g, s); !e.empty())
        return e;
      dev::EpilogueArgs ep;
      ep.acc = static_cast<float *>(D);
      ep.out = D;
      ep.outType = int(ot);
      ep.M = M;
      ep.N = N;
      ep.applyScales = false; // cuBLASLt applied them
      ep.bias = bias;
      ep.biasType = biasType;
      return dev::gemmEpilogue(ep, s);
    }
    if (direct)
      return fp8_->run(call, g, s);
    float *acc = accInOut ? static_cast<float *>(D) : reinterpret_cast<float *>(*sp + offAcc);
    g.D = acc;
    if (vector)
      g.aScaleInv = g.bScaleInv = one_;
    if (std::string e = fp8_->run(call, g, s); !e.empty())
      return e;
    dev::EpilogueArgs ep;
    ep.acc = acc;
    ep.out = D;
    ep.outType = int(ot);
    ep.M = M;
    ep.N = N;
    ep.aScale = SA;
    ep.bScale = SB;
    ep.aRows = rowA;
    ep.bCols = colB;
    ep.applyScales = vector;
    ep.bias = bias;
    ep.biasType = biasType;
    ep.amax = amax;
    return dev::gemmEpilogue(ep, s);
  });
}

/// octet::Attention (Q, K, V) -> (Y, LSE) and octet::AttentionGrad (Q, K, V, Y, LSE, dY) -> (dQ, dK, dV):
/// the fused kernels of Attention.cu (docs/PLAN.md).
void CudaExecutor::compileAttention(const PlanOp &op, bool grad, std::vector<Step> &out) {
  size_t nIn = grad ? 6 : 3, nOut = grad ? 3 : 2;
  if (op.inputs.size() != nIn || op.outputs.size() != nOut)
    fail(op, "expects " + std::to_string(nIn) + " inputs and " + std::to_string(nOut) + " outputs");
  // Q, K, V, Y, dY and the results may be stored in BF16 (fp8-opt --activation-precision=bf16):
  // cuDNN then reads and writes them in place. The log-sum-exp is float32.
  dev::AttnArgs a;
  bool anyBf16 = false;
  for (size_t i = 0; i < nIn + nOut; ++i) {
    int id = i < nIn ? op.inputs[i] : op.outputs[i - nIn];
    bool lse = i == 4; // forward: output 1; backward: input 4
    if (i < nIn && !has(op, i))
      fail(op, "input " + std::to_string(i) + " is missing");
    if (id < 0)
      continue;
    DType t = typeOf(id);
    if (t != DType::F32 && (lse || t != DType::BF16))
      fail(op, std::string(i < nIn ? "input " : "output ") + std::to_string(i < nIn ? i : i - nIn) + " must be " +
                   (lse ? "float32" : "float32 or bfloat16") + ", got " + dtypeName(t));
    // AttnArgs::bf16 order: q, k, v, y, yIn, dy, dq, dk, dv.
    static const int fwdSlot[5] = {0, 1, 2, 3, -1}, bwdSlot[9] = {0, 1, 2, 4, -1, 5, 6, 7, 8};
    int slot = grad ? bwdSlot[i] : fwdSlot[i];
    if (t == DType::BF16 && slot >= 0)
      a.bf16[slot] = anyBf16 = true;
  }
  Shape qs = shapeOf(op.inputs[0]), ks = shapeOf(op.inputs[1]), vs = shapeOf(op.inputs[2]);
  size_t r = qs.size();
  // > 0: ONNX Attention's 3-D form [B, T, heads * d], K and V [B, T, kvHeads * d].
  int64_t heads = attrInt(op, "q_num_heads", 0), kvHeads = attrInt(op, "kv_num_heads", heads);
  if (heads < 0 || (heads ? kvHeads < 1 || heads % kvHeads : kvHeads != 0))
    fail(op, "q_num_heads must be a positive multiple of kv_num_heads (or both absent)");
  // Grouped-query attention: query heads per K/V head (the 4-D form's head axis, the one before T).
  int64_t group = heads ? heads / kvHeads : r >= 3 && ks.size() == r && ks[r - 3] > 0 ? qs[r - 3] / ks[r - 3] : 1;
  Shape repeated = ks; // K's shape with its heads repeated for Q's
  if (heads && r == 3)
    repeated.back() *= group;
  else if (r >= 3 && ks.size() == r)
    repeated[r - 3] *= group;
  if (r < 2 || ks.size() != r || vs != ks || repeated.back() != qs.back() || group < 1 ||
      !std::equal(qs.begin(), qs.end() - 2, repeated.begin()) || (heads && (r != 3 || qs.back() % heads)))
    fail(op, "Q " + shapeString(qs) + ", K " + shapeString(ks) + " and V " + shapeString(vs) +
                 (heads ? " must be [B, T, heads * d] with " + std::to_string(heads) + " and " +
                              std::to_string(kvHeads) + " heads"
                        : std::string(" must be [..., T, d] with one batch and one head width (K and V may have "
                                      "fewer heads, a divisor of Q's)")));
  a.batch = numElements(Shape(qs.begin(), qs.end() - 2)) * std::max<int64_t>(heads, 1);
  a.tq = int(qs[r - 2]);
  a.tk = int(ks[r - 2]);
  a.d = int(qs[r - 1] / std::max<int64_t>(heads, 1));
  a.heads = int(heads);
  a.group = int(group);
  if (qs[r - 2] > INT32_MAX || ks[r - 2] > INT32_MAX)
    fail(op, "sequences longer than 2^31 are not supported");
  if (a.d > dev::kAttentionMaxHeadDim)
    fail(op, "heads wider than " + std::to_string(dev::kAttentionMaxHeadDim) +
                 " are not supported by the CUDA kernels; compile with octet-fuse-attention's max-head-dim below "
                 "the head width, or use --device cpu");
  a.scale = float(attrFloat(op, "scale", 1.0));
  a.causal = attrInt(op, "is_causal", 0) != 0;
  a.precision = attentionPrecision(op);
  a.q = static_cast<const float *>(devicePtr(op.inputs[0]));
  a.k = static_cast<const float *>(devicePtr(op.inputs[1]));
  a.v = static_cast<const float *>(devicePtr(op.inputs[2]));
  size_t rowBytes = (size_t(a.batch) * size_t(a.tq) * 4 + 255) / 256 * 256;
  if (!grad) {
    if (op.outputs[0] < 0)
      fail(op, "the output Y is missing");
    a.y = static_cast<float *>(devicePtr(op.outputs[0]));
    a.lse = static_cast<float *>(devicePtr(op.outputs[1]));
    std::shared_ptr<const dev::CudnnAttention> fused = cudnnAttention(a, false);
    if (anyBf16 && !fused)
      fail(op, "BF16 operands need cuDNN's attention, which this machine cannot run (see the note above); "
               "compile with fp8-opt --activation-precision=f32");
    size_t workBytes = fused ? fused->workspaceBytes() : dev::attentionWorkspaceBytes(a, false);
    char *const *sp = scratch(workBytes);
    attentionProgram(op, a, {qs.back(), ks.back(), vs.back()}, out, [workBytes, fused, sp](dev::AttnArgs a, cudaStream_t s) {
      a.stream = s;
      a.work = workBytes ? *sp : nullptr;
      return fused ? fused->run(a) : dev::attentionForward(a);
    });
    return;
  }
  Shape ls = heads ? Shape{qs[0], heads, qs[1]} : Shape(qs.begin(), qs.end() - 1);
  if (shapeOf(op.inputs[3]) != qs || shapeOf(op.inputs[5]) != qs || shapeOf(op.inputs[4]) != ls)
    fail(op, "Y and dY must be " + shapeString(qs) + " and LSE " + shapeString(ls));
  a.yIn = static_cast<const float *>(devicePtr(op.inputs[3]));
  a.lseIn = static_cast<const float *>(devicePtr(op.inputs[4]));
  a.dy = static_cast<const float *>(devicePtr(op.inputs[5]));
  // Scratch: delta, then a place for any gradient the plan does not keep, then the BF16 operands.
  size_t qBytes = (size_t(numElements(qs)) * 4 + 255) / 256 * 256, kBytes = (size_t(numElements(ks)) * 4 + 255) / 256 * 256;
  size_t missing[3] = {};
  size_t need = rowBytes;
  for (int i = 0; i < 3; ++i)
    if (op.outputs[size_t(i)] < 0) {
      missing[i] = need;
      need += i == 0 ? qBytes : kBytes;
    }
  size_t work = need;
  std::shared_ptr<const dev::CudnnAttention> fused = cudnnAttention(a, true);
  if (anyBf16 && !fused)
    fail(op, "BF16 operands need cuDNN's attention, which this machine cannot run (see the note above); "
             "compile with fp8-opt --activation-precision=f32");
  // Batch slices (the plan's max_workspace_bytes, or CudaOptions::attentionWorkspaceBytes): one
  // launch where its cuDNN workspace fits the bound or arena bytes no buffer holds while this op
  // runs (arenaGap(), where placeScratch() then puts it), else the fewest slices whose workspace
  // fits either, each a whole number of batch rows (heads in place: `heads` (batch, head) pairs a
  // row). The debugging bound slices to the bound alone.
  int64_t slices = 1, unit = heads ? heads : group; // a slice holds whole groups
  size_t bound = opt_.attentionWorkspaceBytes ? opt_.attentionWorkspaceBytes
                                              : size_t(std::max<int64_t>(attrInt(op, "max_workspace_bytes", 0), 0));
  auto fits = [&](const dev::CudnnAttention &f) {
    size_t w = f.workspaceBytes();
    return !bound || w <= bound ||
           (!opt_.attentionWorkspaceBytes && need + w >= kScratchWorthPlacing && arenaGap(compiling_, need + w) >= 0);
  };
  for (int64_t k = 2; fused && !fits(*fused) && k <= a.batch / unit; ++k) {
    if ((a.batch / unit) % k)
      continue;
    dev::AttnArgs part = a;
    part.batch = a.batch / k;
    if (std::shared_ptr<const dev::CudnnAttention> f = cudnnAttention(part, true))
      fused = f, slices = k;
  }
  if (slices > 1)
    ++fusions_["attention gradients in batch slices"];
  need += fused ? fused->workspaceBytes() : dev::attentionWorkspaceBytes(a, true);
  char *const *sp = scratch(need);
  float *outs[3] = {static_cast<float *>(devicePtr(op.outputs[0])), static_cast<float *>(devicePtr(op.outputs[1])),
                    static_cast<float *>(devicePtr(op.outputs[2]))};
  attentionProgram(op, a, {qs.back(), ks.back(), vs.back()}, out, [outs, missing, work, fused, sp, slices](dev::AttnArgs a, cudaStream_t s) {
    a.stream = s;
    a.work = *sp + work;
    a.delta = reinterpret_cast<float *>(*sp);
    a.dq = outs[0] ? outs[0] : reinterpret_cast<float *>(*sp + missing[0]);
    a.dk = outs[1] ? outs[1] : reinterpret_cast<float *>(*sp + missing[1]);
    a.dv = outs[2] ? outs[2] : reinterpret_cast<float *>(*sp + missing[2]);
    if (!fused)
      return dev::attentionBackward(a);
    // Elements of a slice: Q-shaped, K-shaped (batch / group entries), LSE.
    const int64_t n = a.batch / slices, qUnit = n * a.tq * a.d, kUnit = n / a.group * a.tk * a.d, lUnit = n * a.tq;
    for (int64_t j = 0; j < slices; ++j) { // slice j: pairs [j n, (j + 1) n), one after another in the workspace
      dev::AttnArgs p = a;
      p.batch = n;
      auto at = [&](auto *ptr, int slot, int64_t unit) { // BF16 (AttnArgs::bf16) or float32 elements
        using T = std::remove_pointer_t<decltype(ptr)>;
        return reinterpret_cast<T *>(reinterpret_cast<std::conditional_t<std::is_const_v<T>, const char *, char *>>(ptr) +
                                     j * unit * (slot >= 0 && a.bf16[slot] ? 2 : 4));
      };
      p.q = at(a.q, 0, qUnit), p.k = at(a.k, 1, kUnit), p.v = at(a.v, 2, kUnit);
      p.yIn = at(a.yIn, 4, qUnit), p.dy = at(a.dy, 5, qUnit), p.lseIn = at(a.lseIn, -1, lUnit);
      p.dq = at(a.dq, 6, qUnit), p.dk = at(a.dk, 7, kUnit), p.dv = at(a.dv, 8, kUnit);
      if (std::string e = fused->run(p); !e.empty())
        return e;
    }
    return std::string();
  });
}

/// cuDNN's fused attention for a BF16 octet::Attention or AttentionGrad of a's shape (one graph per
/// shape and direction, shared by the plan's ops), or null where the options, cuDNN or the shape
/// rule it out: then Attention.cu's kernels run it (a note says why, once).
std::shared_ptr<const dev::CudnnAttention> CudaExecutor::cudnnAttention(const dev::AttnArgs &a, bool backward) {
  if (a.precision != dev::AttnPrecision::BF16 || !opt_.cudnnAttention)
    return nullptr;
  unsigned bf16 = 0; // the workspace holds BF16 copies of the float32 operands only
  for (int i = 0; i < 9; ++i)
    bf16 |= unsigned(a.bf16[i]) << i;
  auto key = std::make_tuple(backward, a.batch, a.tq, a.tk, a.d, a.heads, a.group, a.scale, a.causal, bf16);
  auto [it, added] = cudnnGraphs_.try_emplace(key);
  if (!added)
    return it->second;
  std::string why;
  it->second = dev::CudnnAttention::build(a, backward, why);
  if (it->second)
    ++fusions_["attention through cuDNN"];
  else if (cudnnNotes_.insert(why).second)
    std::cerr << "note: attention runs on Octet's own kernels (slower): " << why << "\n";
  return it->second;
}

template <class Launch>
void CudaExecutor::attentionProgram(const PlanOp &op, const dev::AttnArgs &a, std::array<int64_t, 3> rowLength,
                                    std::vector<Step> &out, Launch launch) {
  std::function<Step(AttnBias)> withBias = [a, launch](AttnBias bias) -> Step {
    dev::AttnArgs b = a;
    std::copy(bias.begin(), bias.end(), b.bias);
    return [b, launch](cudaStream_t s) { return launch(b, s); };
  };
  out.push_back(withBias({}));
  if (a.precision == dev::AttnPrecision::BF16)
    attentions_[size_t(&op - plan_.ops.data())] = {std::move(withBias), rowLength};
}

} // namespace octet::rt::cuda::detail
