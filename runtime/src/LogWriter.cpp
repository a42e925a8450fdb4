//===- LogWriter.cpp - fp8-run's log lines, written beside the training loop -===//
#include "LogWriter.h"

#include "octet/runtime/Tensor.h"

#include <cerrno>
#include <cstring>

namespace octet::rt {

LogWriter::LogWriter(std::ostream &out, size_t depth, std::string name)
    : out_(out), depth_(depth ? depth : 1), name_(std::move(name)) {
  thread_ = std::thread([this] { run(); });
}

LogWriter::~LogWriter() {
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void LogWriter::push(std::function<std::string()> line) {
  std::unique_lock<std::mutex> lock(m_);
  room_.wait(lock, [&] { return queue_.size() < depth_; });
  if (!error_.empty())
    throw Error(name_ + ": " + error_);
  queue_.push_back(std::move(line));
  ready_.notify_one();
}

void LogWriter::drain() {
  std::unique_lock<std::mutex> lock(m_);
  room_.wait(lock, [&] { return queue_.empty() && busy_ == 0; });
  if (!error_.empty())
    throw Error(name_ + ": " + error_);
}

void LogWriter::run() {
  for (;;) {
    std::function<std::string()> next;
    {
      std::unique_lock<std::mutex> lock(m_);
      ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopped, and every record written
      next = std::move(queue_.front());
      queue_.pop_front();
      ++busy_;
    }
    std::string text, failed;
    try {
      text = next();
    } catch (const std::exception &e) {
      failed = e.what();
    }
    if (failed.empty() && out_) {
      out_ << text << '\n';
      out_.flush();
      if (!out_) // a full disk, a quota, a closed pipe: the loop stops at its next push or drain
        failed = std::string("cannot write (") + std::strerror(errno) + ")";
    }
    {
      std::lock_guard<std::mutex> lock(m_);
      --busy_;
      if (!failed.empty() && error_.empty())
        error_ = failed;
    }
    room_.notify_all();
  }
}

} // namespace octet::rt
