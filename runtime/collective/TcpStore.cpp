//===- TcpStore.cpp - The ranks' rendezvous key-value store ---------------===//
//
// Wire format, one request at a time per connection:
//   request  op(1: 'S' set, 'G' get) keylen(u32) key [vallen(u32) value]   (value for 'S' only)
//            'G' also carries timeout_ms(u32): the server answers once the key exists or then.
//   response 'S': status(1) = 1;  'G': status(1) (1 found, 0 timed out) [vallen(u32) value]
//
//===----------------------------------------------------------------------===//
#include "TcpStore.h"

#include "octet/runtime/Tensor.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace octet::rt {

namespace {

constexpr uint32_t kMaxField = 64u << 20; // keys and values: Gloo's addresses and NCCL's id are small

bool sendAll(int fd, const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  while (n) {
    ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

bool recvAll(int fd, void *p, size_t n) {
  char *c = static_cast<char *>(p);
  while (n) {
    ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

bool sendU32(int fd, uint32_t v) {
  uint32_t n = htonl(v);
  return sendAll(fd, &n, 4);
}

bool recvU32(int fd, uint32_t &v) {
  uint32_t n;
  if (!recvAll(fd, &n, 4))
    return false;
  v = ntohl(n);
  return true;
}

bool recvField(int fd, std::vector<char> &out) {
  uint32_t n;
  if (!recvU32(fd, n) || n > kMaxField)
    return false;
  out.resize(n);
  return n == 0 || recvAll(fd, out.data(), n);
}

} // namespace

TcpStoreServer::TcpStoreServer(int port) {
  listenFd_ = ::socket(AF_INET6, SOCK_STREAM, 0);
  bool v6 = listenFd_ >= 0;
  if (!v6)
    listenFd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listenFd_ < 0)
    throw Error(std::string("rendezvous store: cannot create a socket (") + std::strerror(errno) + ")");
  int one = 1, zero = 0;
  ::setsockopt(listenFd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    ::setsockopt(listenFd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero); // IPv4 peers too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(uint16_t(port));
    rc = ::bind(listenFd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(uint16_t(port));
    rc = ::bind(listenFd_, reinterpret_cast<sockaddr *>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(listenFd_, 128) != 0) {
    int e = errno;
    ::close(listenFd_);
    throw Error("rendezvous store: cannot listen on port " + std::to_string(port) + " (" + std::strerror(e) +
                "); pick a free MASTER_PORT");
  }
  acceptor_ = std::thread([this] {
    for (;;) {
      int fd = ::accept(listenFd_, nullptr, nullptr);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        if (fd >= 0)
          ::close(fd);
        return;
      }
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED)
          continue;
        return;
      }
      clients_.push_back(fd);
      threads_.emplace_back([this, fd] { serve(fd); });
    }
  });
}

TcpStoreServer::~TcpStoreServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    ::shutdown(listenFd_, SHUT_RDWR);
    for (int fd : clients_)
      ::shutdown(fd, SHUT_RDWR);
  }
  cv_.notify_all();
  acceptor_.join();
  for (std::thread &t : threads_)
    t.join();
  for (int fd : clients_)
    ::close(fd);
  ::close(listenFd_);
}

void TcpStoreServer::serve(int fd) {
  for (;;) {
    char op;
    std::vector<char> key, value;
    if (!recvAll(fd, &op, 1) || !recvField(fd, key))
      return;
    std::string k(key.begin(), key.end());
    if (op == 'S') {
      if (!recvField(fd, value))
        return;
      {
        std::lock_guard<std::mutex> lock(mu_);
        data_[k] = std::move(value);
      }
      cv_.notify_all();
      char okc = 1;
      if (!sendAll(fd, &okc, 1))
        return;
    } else if (op == 'G') {
      uint32_t ms;
      if (!recvU32(fd, ms))
        return;
      std::unique_lock<std::mutex> lock(mu_);
      bool found = cv_.wait_for(lock, std::chrono::milliseconds(ms),
                                [&] { return stopping_ || data_.count(k) != 0; }) &&
                   data_.count(k);
      std::vector<char> v = found ? data_[k] : std::vector<char>{};
      lock.unlock();
      char st = found ? 1 : 0;
      if (!sendAll(fd, &st, 1) || (found && (!sendU32(fd, uint32_t(v.size())) || !sendAll(fd, v.data(), v.size()))))
        return;
    } else {
      return; // not our protocol: drop the connection
    }
  }
}

TcpStore::TcpStore(const std::string &host, int port, std::chrono::milliseconds timeout)
    : where_(host + ":" + std::to_string(port)), timeout_(timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no answer";
  while (std::chrono::steady_clock::now() < deadline) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (g != 0)
      throw Error("MASTER_ADDR '" + host + "': " + ::gai_strerror(g));
    for (addrinfo *a = res; a && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd < 0)
        continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last = std::strerror(errno);
        ::close(fd);
      }
    }
    ::freeaddrinfo(res);
    if (fd_ >= 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (fd_ < 0)
    throw Error("rendezvous: no store at " + where_ + " after " + std::to_string(timeout.count() / 1000) +
                " s (" + last + "); is rank 0 running, and are MASTER_ADDR/MASTER_PORT the same on every rank?");
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::vector<char> TcpStore::request(char op, const std::string &key, const std::vector<char> &value,
                                    std::chrono::milliseconds timeout) {
  auto lost = [&] { return Error("rendezvous: the store at " + where_ + " (rank 0) went away"); };
  if (!sendAll(fd_, &op, 1) || !sendU32(fd_, uint32_t(key.size())) || !sendAll(fd_, key.data(), key.size()))
    throw lost();
  if (op == 'S' && (!sendU32(fd_, uint32_t(value.size())) || !sendAll(fd_, value.data(), value.size())))
    throw lost();
  if (op == 'G' && !sendU32(fd_, uint32_t(timeout.count())))
    throw lost();
  char st;
  if (!recvAll(fd_, &st, 1))
    throw lost();
  if (op == 'S')
    return {};
  if (!st)
    throw Error("rendezvous: '" + key + "' did not arrive within " + std::to_string(timeout.count() / 1000) +
                " s; a rank did not start or died (check every rank's output)");
  std::vector<char> v;
  if (!recvField(fd_, v))
    throw lost();
  return v;
}

void TcpStore::set(const std::string &key, const std::vector<char> &data) { request('S', key, data, timeout_); }
std::vector<char> TcpStore::get(const std::string &key) { return request('G', key, {}, timeout_); }
void TcpStore::wait(const std::vector<std::string> &keys) {
  for (const std::string &k : keys)
    get(k);
}
void TcpStore::wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) {
  for (const std::string &k : keys)
    request('G', k, {}, timeout);
}

} // namespace octet::rt
