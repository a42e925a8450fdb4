//===- CudnnAttention.cpp - octet::Attention through cuDNN's fused SDPA -===//
//
// One cudnn-frontend graph per attention op and direction, built (heuristics, support check,
// execution plan) when the plan loads; run() converts the float32 operands into BF16 copies in
// the workspace, executes the graph on the op's stream (capturable into the step's CUDA graph)
// and converts the results back. Tensors are described to cuDNN as [B, H, T, d] with the strides
// of the executor's layouts: [B, T, H * d] with the heads in place (ONNX Attention's 3-D form), or
// [batch, T, d] as one head per batch entry. LSE is cuDNN's softmax statistics, the rows'
// natural-log log-sum-exp of the scaled scores, [B, H, T] as the executor keeps it. The backward
// asks for cuDNN's deterministic algorithm (the GPU step stays bit-reproducible).
//
//===----------------------------------------------------------------------===//
#include "CudnnAttention.h"

#ifdef OCTET_HAVE_CUDNN_FRONTEND
#define NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING
#include <cudnn_frontend.h>
#include <dlfcn.h>
#endif

#include <cuda_runtime.h>


#ifdef OCTET_HAVE_CUDNN_FRONTEND
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr; // the frontend's dynamic loading reads cuDNN's symbols from here
} // namespace cudnn_frontend
#endif

namespace octet::rt::cuda::dev {

#ifdef OCTET_HAVE_CUDNN_FRONTEND
namespace fe = cudnn_frontend;

namespace {

/// The process's cuDNN: opened once, with one handle (one GPU per process).
struct Library {
  std::string why; // empty when usable
  int version = 0;
  cudnnHandle_t handle = nullptr;
};

const Library &library() {
  static Library lib = [] {
    Library l;
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      const char *e = dlerror();
      l.why = std::string("cuDNN 9 not found (") + (e ? e : "dlopen failed") +
              "); put libcudnn.so.9 on LD_LIBRARY_PATH for fused attention";
      return l;
    }
    fe::cudnn_dlhandle = h;
    try {
      l.version = int(fe::detail::get_backend_version());
      if (l.version < 90000) {
        l.why = "cuDNN " + std::to_string(l.version) + " is older than 9.0";
        return l;
      }
      if (fe::detail::create_handle(&l.handle) != CUDNN_STATUS_SUCCESS) {
        l.why = "cudnnCreate failed";
        l.handle = nullptr;
      }
    } catch (const std::exception &e) {
      l.why = std::string("cuDNN: ") + e.what();
    }
    return l;
  }();
  return lib;
}

int64_t align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

// Tensor uids in the graphs' variant packs.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

} // namespace

struct CudnnAttention::Impl {
  std::shared_ptr<fe::graph::Graph> graph;
  bool backward = false;
  int64_t qElems = 0, kElems = 0, statsElems = 0;
  int64_t cudnnWork = 0;
  // Byte offsets in the workspace: BF16 Q, K, V, O (and dO, dQ, dK, dV), float32 stats where the
  // caller keeps no LSE, then cuDNN's own workspace.
  int64_t off[8] = {}, statsOff = 0, workOff = 0, total = 0;
};

std::unique_ptr<CudnnAttention> CudnnAttention::build(const AttnArgs &a, bool backward, std::string &why) {
  const Library &lib = library();
  if (!lib.why.empty()) {
    why = lib.why;
    return nullptr;
  }
  if (a.d % 8 || a.d > 256) {
    why = "cuDNN's fused attention needs head widths that are multiples of 8 up to 256 (this one: " +
          std::to_string(a.d) + ")";
    return nullptr;
  }
  if (a.tq < 1 || a.tk < 1 || a.batch < 1 || (a.heads && a.batch % a.heads)) {
    why = "empty attention, or " + std::to_string(a.batch) + " heads in all is not a multiple of " +
          std::to_string(a.heads) + " heads";
    return nullptr;
  }
  if (a.group < 1 || a.batch % a.group || (a.heads && a.heads % a.group)) {
    why = std::to_string(a.group) + " query heads per K/V head do not divide the heads";
    return nullptr;
  }
  auto impl = std::make_unique<Impl>();
  impl->backward = backward;
  // Q [B, H, T, d] and K, V [B, G, T, d] (grouped-query: G = H / group). One head per batch entry
  // describes its groups as [batch / group, group, T, d] against [batch / group, 1, T, d].
  const int64_t H = a.heads ? a.heads : a.group, B = a.batch / H, G = H / a.group, d = a.d;
  // [B, heads, T, d] over the executor's layouts (see the file comment).
  auto strides = [&](int64_t t, int64_t heads) -> std::vector<int64_t> {
    return a.heads ? std::vector<int64_t>{t * heads * d, d, heads * d, 1}
                   : std::vector<int64_t>{heads * t * d, t * d, d, 1};
  };
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char *name, Uid uid, int64_t t, int64_t heads) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim({B, heads, t, d}).set_stride(
        strides(t, heads)));
  };
  auto q = tensor("Q", kQ, a.tq, H), k = tensor("K", kK, a.tk, G), v = tensor("V", kV, a.tk, G);
  std::vector<int64_t> statsDim{B, H, a.tq, 1}, statsStride{H * a.tq, a.tq, 1, 1};
  try {
    if (!backward) {
      auto o = fe::graph::SDPA_attributes().set_name("attention").set_generate_stats(true).set_attn_scale(a.scale);
      if (a.causal)
        o.set_causal_mask(true); // top-left, as Octet's mask: key j hidden from query i when j > i
      auto [out, stats] = g->sdpa(q, k, v, o);
      out->set_output(true).set_uid(kO).set_dim({B, H, a.tq, d}).set_stride(strides(a.tq, H));
      stats->set_output(true).set_uid(kStats).set_data_type(fe::DataType_t::FLOAT).set_dim(statsDim).set_stride(
          statsStride);
    } else {
      auto out = tensor("O", kO, a.tq, H), dOut = tensor("dO", kDO, a.tq, H);
      auto stats = g->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(kStats)
                                 .set_dim(statsDim)
                                 .set_stride(statsStride)
                                 .set_data_type(fe::DataType_t::FLOAT));
      auto o = fe::graph::SDPA_backward_attributes()
                   .set_name("attention_grad")
                   .set_attn_scale(a.scale)
                   .set_deterministic_algorithm(true);
      if (a.causal)
        o.set_causal_mask(true);
      auto [dq, dk, dv] = g->sdpa_backward(q, k, v, out, dOut, stats, o);
      dq->set_output(true).set_uid(kDQ).set_dim({B, H, a.tq, d}).set_stride(strides(a.tq, H));
      dk->set_output(true).set_uid(kDK).set_dim({B, G, a.tk, d}).set_stride(strides(a.tk, G));
      dv->set_output(true).set_uid(kDV).set_dim({B, G, a.tk, d}).set_stride(strides(a.tk, G));
    }
    fe::error_t e = g->build(lib.handle, {fe::HeurMode_t::A});
    if (e.is_good())
      e = g->get_workspace_size(impl->cudnnWork);
    if (!e.is_good()) {
      why = "cuDNN has no " + std::string(backward ? "deterministic backward " : "forward ") +
            "attention engine for this shape: " + e.get_message();
      return nullptr;
    }
  } catch (const std::exception &e) {
    why = std::string("cuDNN attention: ") + e.what();
    return nullptr;
  }
  impl->graph = std::move(g);
  impl->qElems = a.batch * a.tq * d;
  impl->kElems = a.batch / a.group * a.tk * d;
  impl->statsElems = a.batch * a.tq;
  // Q, K, V, O; backward: dO, dQ, dK, dV.
  const int64_t elems[8] = {impl->qElems, impl->kElems, impl->kElems, impl->qElems,
                            impl->qElems, impl->qElems, impl->kElems, impl->kElems};
  // Only operands the plan stores in float32 need a BF16 copy (AttnArgs::bf16's argument of each
  // slot); the others are read and written in place and take no workspace.
  static const int fwdArg[4] = {0, 1, 2, 3}, bwdArg[8] = {0, 1, 2, 4, 5, 6, 7, 8};
  int64_t at = 0;
  for (int i = 0; i < (backward ? 8 : 4); ++i) {
    impl->off[i] = at;
    if (!a.bf16[backward ? bwdArg[i] : fwdArg[i]])
      at += align256(elems[i] * 2);
  }
  impl->statsOff = at;
  at += backward ? 0 : align256(impl->statsElems * 4);
  impl->workOff = at;
  impl->total = at + align256(impl->cudnnWork);
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(impl)));
}

std::string CudnnAttention::run(const AttnArgs &a) const {
  const Impl &m = *impl_;
  if (!a.work)
    return "cuDNN attention: no workspace";
  char *w = static_cast<char *>(a.work);
  auto bf16 = [&](int i) { return reinterpret_cast<uint16_t *>(w + m.off[i]); };
  // A bias's row length: Q's, and K's and V's (grouped-query: fewer heads).
  const int64_t width = int64_t(a.d) * (a.heads ? a.heads : 1), kvWidth = a.heads ? width / a.group : width;
  // Operands the plan stores in BF16 are read where they are (AttnArgs::bf16, slot order q, k, v,
  // y, yIn, dy, dq, dk, dv); float32 ones go through BF16 copies in the workspace.
  Bf16Pack in;
  auto pack = [&](const float *src, const float *bias, int slot, int arg, int64_t n) {
    if (a.bf16[arg])
      return;
    int j = in.count++;
    in.src[j] = src, in.bias[j] = bias, in.width[j] = slot == 1 || slot == 2 ? kvWidth : width,
    in.dst[j] = bf16(slot), in.n[j] = n;
  };
  pack(a.q, a.bias[0], 0, 0, m.qElems);
  pack(a.k, a.bias[1], 1, 1, m.kElems);
  pack(a.v, a.bias[2], 2, 2, m.kElems);
  if (m.backward) {
    pack(a.yIn, nullptr, 3, 4, m.qElems);
    pack(a.dy, nullptr, 4, 5, m.qElems);
  }
  if (in.count)
    if (std::string e = toBf16(in, a.stream); !e.empty())
      return "cuDNN attention: " + e;
  if (std::string e = execute(a); !e.empty())
    return e;
  Bf16Unpack out;
  auto unpack = [&](int slot, int arg, float *dst, int64_t n) {
    if (a.bf16[arg])
      return;
    int j = out.count++;
    out.src[j] = bf16(slot), out.dst[j] = dst, out.n[j] = n;
  };
  if (!m.backward) {
    unpack(3, 3, a.y, m.qElems);
  } else {
    unpack(5, 6, a.dq, m.qElems);
    unpack(6, 7, a.dk, m.kElems);
    unpack(7, 8, a.dv, m.kElems);
  }
  if (out.count)
    if (std::string e = fromBf16(out, a.stream); !e.empty())
      return "cuDNN attention: " + e;
  return "";
}

std::string CudnnAttention::execute(const AttnArgs &a) const {
  const Impl &m = *impl_;
  char *w = static_cast<char *>(a.work);
  // The workspace copy of operand `slot`, or the plan's BF16 tensor itself (argument `arg`).
  auto at = [&](int slot, int arg, const void *own) {
    return a.bf16[arg] ? const_cast<void *>(own) : static_cast<void *>(w + m.off[slot]);
  };
  std::unordered_map<int64_t, void *> vars = {
      {kQ, at(0, 0, a.q)}, {kK, at(1, 1, a.k)}, {kV, at(2, 2, a.v)}, {kO, m.backward ? at(3, 4, a.yIn) : at(3, 3, a.y)}};
  if (!m.backward) {
    vars[kStats] = a.lse ? static_cast<void *>(a.lse) : static_cast<void *>(w + m.statsOff);
  } else {
    vars[kStats] = const_cast<float *>(a.lseIn);
    vars[kDO] = at(4, 5, a.dy), vars[kDQ] = at(5, 6, a.dq), vars[kDK] = at(6, 7, a.dk), vars[kDV] = at(7, 8, a.dv);
  }
  const Library &lib = library();
  if (fe::detail::set_stream(lib.handle, a.stream) != CUDNN_STATUS_SUCCESS)
    return "cuDNN attention: cudnnSetStream failed";
  fe::error_t e = m.graph->execute(lib.handle, vars, w + m.workOff);
  if (!e.is_good())
    return std::string("cuDNN attention") + (m.backward ? " gradient: " : ": ") + e.get_message();
  return "";
}

size_t CudnnAttention::workspaceBytes() const { return size_t(impl_->total); }

bool cudnnAvailable(std::string *why) {
  const Library &lib = library();
  if (why)
    *why = lib.why;
  return lib.why.empty();
}

int cudnnVersion() { return cudnnAvailable() ? library().version : 0; }

#else // built without the cudnn-frontend headers

struct CudnnAttention::Impl {};

std::unique_ptr<CudnnAttention> CudnnAttention::build(const AttnArgs &, bool, std::string &why) {
  why = "built without the cudnn-frontend headers (scripts/install-deps.sh installs them)";
  return nullptr;
}
std::string CudnnAttention::run(const AttnArgs &) const { return "cuDNN attention: not built"; }
std::string CudnnAttention::execute(const AttnArgs &) const { return "cuDNN attention: not built"; }
size_t CudnnAttention::workspaceBytes() const { return 0; }
bool cudnnAvailable(std::string *why) {
  if (why)
    *why = "built without the cudnn-frontend headers";
  return false;
}
int cudnnVersion() { return 0; }

#endif

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;

} // namespace octet::rt::cuda::dev
