//===- TcpStore.h - The ranks' rendezvous key-value store -------*- C++ -*-===//
//
// Gloo (Debian's build) ships file, hash and Redis stores but no TCP one, and
// NCCL needs its unique id carried from rank 0 to the others: rank 0 serves
// this small store (set, blocking get) on the master port, every rank talks
// to it, and it is closed once all ranks have connected.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_COLLECTIVE_TCPSTORE_H
#define OCTET_RUNTIME_COLLECTIVE_TCPSTORE_H

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace octet::rt {

/// Rank 0's server: accepts any number of clients until destroyed.
class TcpStoreServer {
public:
  /// Listens on `port` (all interfaces); throws Error when the port is taken.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();

private:
  void serve(int fd);
  int listenFd_ = -1;
  bool stopping_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<char>> data_;
  std::vector<int> clients_;
  std::vector<std::thread> threads_;
  std::thread acceptor_;
};

/// A client, usable as Gloo's rendezvous store.
class TcpStore : public gloo::rendezvous::Store {
public:
  /// Connects to host:port, retrying until `timeout` (rank 0 may start last).
  TcpStore(const std::string &host, int port, std::chrono::milliseconds timeout);
  ~TcpStore() override;
  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  /// Each key, waiting at most `timeout` for it (the plain wait and get: the store's timeout).
  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override;

private:
  std::vector<char> request(char op, const std::string &key, const std::vector<char> &value,
                            std::chrono::milliseconds timeout);
  int fd_ = -1;
  std::string where_;
  std::chrono::milliseconds timeout_;
};

} // namespace octet::rt

#endif
