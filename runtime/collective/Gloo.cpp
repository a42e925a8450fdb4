//===- Gloo.cpp - Host-memory collectives through Gloo over TCP -----------===//
//
// Gloo runs the algorithms (ring all-reduce, broadcast, barrier); Octet only
// supplies the elementwise reductions of the types Gloo does not know: FP16,
// BF16 and FP8 (decode, add in float, round to nearest even with saturation,
// as NCCL's float8 reduction), and a max that propagates NaN.
//
//===----------------------------------------------------------------------===//
#include "GlooCommunicator.h"

#include "octet/runtime/Fp8.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <cmath>
#include <cstring>
#include <unistd.h>

namespace octet::rt {

namespace {

template <typename Load, typename Store>
gloo::AllreduceOptions::Func elementwise(ReduceOp op, Load load, Store store) {
  return [op, load, store](void *out, const void *a, const void *b, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      float x = load(a, i), y = load(b, i);
      float r = op == ReduceOp::Sum ? x + y : (std::isnan(x) || std::isnan(y)) ? NAN : std::max(x, y);
      store(out, i, r);
    }
  };
}

gloo::AllreduceOptions::Func reduction(DType t, ReduceOp op) {
  auto u16 = [](const void *p, size_t i) { return static_cast<const uint16_t *>(p)[i]; };
  switch (t) {
  case DType::F32:
    return elementwise(
        op, [](const void *p, size_t i) { return static_cast<const float *>(p)[i]; },
        [](void *p, size_t i, float v) { static_cast<float *>(p)[i] = v; });
  case DType::F16:
    return elementwise(
        op, [u16](const void *p, size_t i) { return halfToFloat(u16(p, i)); },
        [](void *p, size_t i, float v) { static_cast<uint16_t *>(p)[i] = floatToHalf(v); });
  case DType::BF16:
    return elementwise(
        op, [u16](const void *p, size_t i) { return bf16ToFloat(u16(p, i)); },
        [](void *p, size_t i, float v) { static_cast<uint16_t *>(p)[i] = floatToBf16(v); });
  case DType::F8E4M3FN:
  case DType::F8E5M2: {
    Fp8Format f = fp8FormatOf(t);
    const float *table = fp8DecodeTable(f);
    return elementwise(
        op, [table](const void *p, size_t i) { return table[static_cast<const uint8_t *>(p)[i]]; },
        [f](void *p, size_t i, float v) { static_cast<uint8_t *>(p)[i] = fp8Encode(v, f, true); });
  }
  default:
    throw Error(std::string("all-reduce: element type ") + dtypeName(t) + " is not reducible");
  }
}

std::string localHostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

} // namespace

GlooCommunicator::GlooCommunicator(int rank, int size, gloo::rendezvous::Store &store,
                                   std::chrono::milliseconds timeout, bool loopback)
    : timeout_(timeout) {
  gloo::transport::tcp::attr attr;
  if (const char *ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
    attr.iface = ifname; // PyTorch's variable: the interface the ranks talk over
  else
    attr.hostname = loopback ? "127.0.0.1" : localHostName();
  try {
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(timeout);
    gloo::rendezvous::PrefixStore prefixed("octet.gloo", store);
    ctx->connectFullMesh(prefixed, dev);
    ctx_ = ctx;
  } catch (const gloo::Exception &e) {
    throw Error("rank " + std::to_string(rank) + ": cannot connect to the other ranks (Gloo: " + e.what() + ")");
  }
}

GlooCommunicator::~GlooCommunicator() = default;

int GlooCommunicator::rank() const { return ctx_->rank; }
int GlooCommunicator::size() const { return ctx_->size; }

[[noreturn]] void GlooCommunicator::lost(const char *what, const std::exception &e) const {
  // Gloo names the peer by address only; with two ranks the peer is the other one.
  std::string peer = size() == 2 ? "rank " + std::to_string(1 - rank()) : "a peer";
  throw Error("rank " + std::to_string(rank()) + ": " + what + " failed: " + peer +
              " is gone or did not answer within " + std::to_string(timeout_.count() / 1000) + " s (Gloo: " +
              e.what() + ")");
}

void GlooCommunicator::allReduce(void *data, size_t count, DType dtype, ReduceOp op, void *) {
  if (count == 0)
    return;
  if (op == ReduceOp::Avg && isFp8(dtype))
    throw Error("all-reduce: an FP8 payload cannot be averaged (pre-divide it and sum)");
  gloo::AllreduceOptions opts(ctx_);
  size_t w = dtypeSize(dtype);
  // Gloo sizes its buffers from the pointer's type: hand it bytes-wide elements of the right width.
  if (w == 4)
    opts.setOutput(static_cast<float *>(data), count);
  else if (w == 2)
    opts.setOutput(static_cast<uint16_t *>(data), count);
  else if (w == 1)
    opts.setOutput(static_cast<uint8_t *>(data), count);
  else
    throw Error(std::string("all-reduce: element type ") + dtypeName(dtype) + " is not reducible");
  opts.setReduceFunction(reduction(dtype, op == ReduceOp::Max ? ReduceOp::Max : ReduceOp::Sum));
  opts.setTag(tag_++);
  opts.setTimeout(timeout_);
  try {
    gloo::allreduce(opts);
  } catch (const gloo::Exception &e) {
    lost("all-reduce", e);
  }
  if (op == ReduceOp::Avg) { // the sum, divided in float and rounded once to the element type
    float n = float(size());
    for (size_t i = 0; i < count; ++i) {
      float v = dtype == DType::F32    ? static_cast<float *>(data)[i]
                : dtype == DType::F16  ? halfToFloat(static_cast<uint16_t *>(data)[i])
                                       : bf16ToFloat(static_cast<uint16_t *>(data)[i]);
      v /= n;
      if (dtype == DType::F32)
        static_cast<float *>(data)[i] = v;
      else if (dtype == DType::F16)
        static_cast<uint16_t *>(data)[i] = floatToHalf(v);
      else
        static_cast<uint16_t *>(data)[i] = floatToBf16(v);
    }
  }
}

void GlooCommunicator::broadcast(void *data, size_t bytes, int root, void *) {
  gloo::BroadcastOptions opts(ctx_);
  opts.setOutput(static_cast<uint8_t *>(data), bytes);
  opts.setRoot(root);
  opts.setTag(tag_++);
  opts.setTimeout(timeout_);
  try {
    gloo::broadcast(opts);
  } catch (const gloo::Exception &e) {
    lost("broadcast", e);
  }
}

void GlooCommunicator::barrier() {
  gloo::BarrierOptions opts(ctx_);
  opts.setTag(tag_++);
  opts.setTimeout(timeout_);
  try {
    gloo::barrier(opts);
  } catch (const gloo::Exception &e) {
    lost("barrier", e);
  }
}

} // namespace octet::rt
