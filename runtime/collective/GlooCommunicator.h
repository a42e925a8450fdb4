//===- GlooCommunicator.h - Host-memory collectives (Gloo) -------*- C++ -*-===//
#ifndef OCTET_RUNTIME_COLLECTIVE_GLOOCOMMUNICATOR_H
#define OCTET_RUNTIME_COLLECTIVE_GLOOCOMMUNICATOR_H

#include "octet/runtime/Collective.h"

#include <gloo/common/error.h>

#include <chrono>
#include <exception>
#include <memory>

namespace gloo {
class Context;
namespace rendezvous {
class Store;
}
} // namespace gloo

namespace octet::rt {

class GlooCommunicator : public Communicator {
public:
  /// Connects a full mesh of `size` ranks through `store`. `loopback`: every rank on this host.
  GlooCommunicator(int rank, int size, gloo::rendezvous::Store &store, std::chrono::milliseconds timeout,
                   bool loopback);
  ~GlooCommunicator() override;
  int rank() const override;
  int size() const override;
  std::string backend() const override { return "gloo"; }
  bool deviceMemory() const override { return false; }
  void allReduce(void *data, size_t count, DType dtype, ReduceOp op, void *stream = nullptr) override;
  void broadcast(void *data, size_t bytes, int root, void *stream = nullptr) override;
  void reduceScatter(const void *send, void *recv, size_t count, DType dtype, ReduceOp op,
                     void *stream = nullptr) override;
  void allGather(const void *send, void *recv, size_t bytes, void *stream = nullptr) override;
  void barrier() override;

private:
  [[noreturn]] void lost(const char *what, const std::exception &e) const;
  /// One Gloo collective: the next tag, the timeout, and a lost peer as one line naming `what`.
  template <class Options, class Call> void run(Options &opts, const char *what, Call call) {
    opts.setTag(tag_++);
    opts.setTimeout(timeout_);
    try {
      call(opts);
    } catch (const gloo::Exception &e) {
      lost(what, e);
    }
  }
  std::shared_ptr<gloo::Context> ctx_;
  uint32_t tag_ = 0;
};

} // namespace octet::rt

#endif
