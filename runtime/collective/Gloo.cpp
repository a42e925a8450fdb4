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

#include <gloo/allgather.h>
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
#include <vector>

namespace octet::rt {

namespace {

/// Element i of a buffer of type `t`, widened to float (exact), and a float rounded back to nearest
/// even (FP8 saturating).
float load(DType t, const void *p, size_t i) {
  switch (t) {
  case DType::F32: return static_cast<const float *>(p)[i];
  case DType::F16: return halfToFloat(static_cast<const uint16_t *>(p)[i]);
  case DType::BF16: return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  default: return fp8DecodeTable(fp8FormatOf(t))[static_cast<const uint8_t *>(p)[i]];
  }
}

void store(DType t, void *p, size_t i, float v) {
  switch (t) {
  case DType::F32: static_cast<float *>(p)[i] = v; break;
  case DType::F16: static_cast<uint16_t *>(p)[i] = floatToHalf(v); break;
  case DType::BF16: static_cast<uint16_t *>(p)[i] = floatToBf16(v); break;
  default: static_cast<uint8_t *>(p)[i] = fp8Encode(v, fp8FormatOf(t), true);
  }
}

bool reducible(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || isFp8(t);
}

/// Gloo's elementwise reduction for `t`: a sum (rounded once per addition) or a max that keeps NaN.
gloo::AllreduceOptions::Func reduction(DType t, ReduceOp op) {
  return [t, op](void *out, const void *a, const void *b, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      float x = load(t, a, i), y = load(t, b, i);
      store(t, out, i, op == ReduceOp::Max ? (std::isnan(x) || std::isnan(y) ? NAN : std::max(x, y)) : x + y);
    }
  };
}

std::string localHostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

} // namespace

GlooCommunicator::GlooCommunicator(int rank, int size, gloo::rendezvous::Store &store,
                                   std::chrono::milliseconds timeout, bool loopback) {
  timeout_ = timeout;
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
  if (!reducible(dtype))
    throw Error(std::string("all-reduce: element type ") + dtypeName(dtype) + " is not reducible");
  gloo::AllreduceOptions opts(ctx_);
  // Gloo sizes its buffers from the pointer's type: hand it elements of the right width.
  size_t w = dtypeSize(dtype);
  if (w == 4)
    opts.setOutput(static_cast<float *>(data), count);
  else if (w == 2)
    opts.setOutput(static_cast<uint16_t *>(data), count);
  else
    opts.setOutput(static_cast<uint8_t *>(data), count);
  opts.setReduceFunction(reduction(dtype, op == ReduceOp::Max ? ReduceOp::Max : ReduceOp::Sum));
  run(opts, "all-reduce", [](auto &o) { gloo::allreduce(o); });
  if (op == ReduceOp::Avg) // the sum, divided in float and rounded once to the element type
    for (size_t i = 0; i < count; ++i)
      store(dtype, data, i, load(dtype, data, i) / float(size()));
}

void GlooCommunicator::broadcast(void *data, size_t bytes, int root, void *) {
  gloo::BroadcastOptions opts(ctx_);
  opts.setOutput(static_cast<uint8_t *>(data), bytes);
  opts.setRoot(root);
  run(opts, "broadcast", [](auto &o) { gloo::broadcast(o); });
}

// Gloo has no options-style reduce-scatter: the whole buffer is all-reduced (the same reduction and
// rounding as allReduce, twice the bytes of a ring reduce-scatter) and this rank keeps its slice.
void GlooCommunicator::reduceScatter(const void *send, void *recv, size_t count, DType dtype, ReduceOp op, void *) {
  const size_t w = dtypeSize(dtype), n = size_t(size());
  std::vector<uint8_t> all(static_cast<const uint8_t *>(send), static_cast<const uint8_t *>(send) + n * count * w);
  allReduce(all.data(), n * count, dtype, op);
  std::memmove(recv, all.data() + size_t(rank()) * count * w, count * w);
}

void GlooCommunicator::allGather(const void *send, void *recv, size_t bytes, void *) {
  if (bytes == 0)
    return;
  std::vector<uint8_t> mine(static_cast<const uint8_t *>(send), static_cast<const uint8_t *>(send) + bytes);
  gloo::AllgatherOptions opts(ctx_);
  opts.setInput(mine.data(), bytes);
  opts.setOutput(static_cast<uint8_t *>(recv), bytes * size_t(size()));
  run(opts, "all-gather", [](auto &o) { gloo::allgather(o); });
}

void GlooCommunicator::barrier() {
  gloo::BarrierOptions opts(ctx_);
  run(opts, "barrier", [](auto &o) { gloo::barrier(o); });
}

} // namespace octet::rt
