//===- LogWriter.cpp - fp8-run's log lines, written beside the training loop -===//
#include "LogWriter.h"

#include "octet/runtime/Tensor.h"

namespace octet::rt {

LogWriter::LogWriter(std::ostream &out, size_t depth) : out_(out), depth_(depth ? depth : 1) {
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
    throw Error("the log: " + error_);
  queue_.push_back(std::move(line));
  ready_.notify_one();
}

void LogWriter::drain() {
  std::unique_lock<std::mutex> lock(m_);
  room_.wait(lock, [&] { return queue_.empty() && busy_ == 0; });
  if (!error_.empty())
    throw Error("the log: " + error_);
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
    if (failed.empty()) {
      out_ << text << '\n';
      out_.flush();
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
