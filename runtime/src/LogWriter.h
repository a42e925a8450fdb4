//===- LogWriter.h - fp8-run's log lines, written beside the training loop -*- C++ -*-===//
//
// The training loop hands each step's record to a LogWriter as a closure that makes the line
// (JSON or CSV); a thread of the writer's own makes and writes the lines, in the order given, so
// the work of a record (an FP8 sample's amax histories reduced, ~150 JSON entries formatted, the
// write and flush) runs while the next step trains instead of before it is launched. At most
// `depth` records wait: a loop that outruns the disk waits for room. The destructor writes every
// record given, then joins: a run that stops on an error still logs the steps before it.
//
//===----------------------------------------------------------------------===//
#ifndef OCTET_RUNTIME_SRC_LOGWRITER_H
#define OCTET_RUNTIME_SRC_LOGWRITER_H

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <ostream>
#include <string>
#include <thread>

namespace octet::rt {

class LogWriter {
public:
  /// Lines go to `out` (which must outlive the writer), each flushed as written; errors name it
  /// as `name` (the log file's path).
  explicit LogWriter(std::ostream &out, size_t depth = 64, std::string name = "the log");
  ~LogWriter();
  LogWriter(const LogWriter &) = delete;
  LogWriter &operator=(const LogWriter &) = delete;

  /// Queues a record: `line` runs on the writer's thread and returns the line's text, without
  /// its newline. It must own what it reads (captured by value). Throws Error if an earlier
  /// record's closure threw (its message).
  void push(std::function<std::string()> line);

  /// Waits until every record pushed so far is written; throws as push() does, and when a line
  /// could not be written (the stream failed: a full disk).
  void drain();

private:
  void run();

  std::ostream &out_;
  size_t depth_;
  std::string name_;
  std::mutex m_;
  std::condition_variable ready_, room_;
  std::deque<std::function<std::string()>> queue_;
  size_t busy_ = 0; // records taken off the queue and not yet written
  bool stop_ = false;
  std::string error_; // the first closure's exception, given to the loop at its next push or drain
  std::thread thread_;
};

} // namespace octet::rt

#endif
