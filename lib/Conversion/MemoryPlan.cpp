//===- MemoryPlan.cpp - Activation arena planning ---------------------------===//
#include "octet/Conversion/MemoryPlan.h"

#include <algorithm>

octet::MemoryPlan octet::planMemory(const std::vector<BufferRequest> &requests, int64_t alignment) {
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return requests[a].bytes > requests[b].bytes; // largest first
  });
  MemoryPlan plan;
  std::vector<std::pair<size_t, int64_t>> placed; // (request index, offset)
  auto align = [&](int64_t v) { return (v + alignment - 1) / alignment * alignment; };
  for (size_t i : order) {
    const BufferRequest &r = requests[i];
    // Ranges taken by buffers alive at the same time, by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (auto &[j, off] : placed) {
      const BufferRequest &o = requests[j];
      if (o.first <= r.last && r.first <= o.last)
        busy.push_back({off, off + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (auto &[begin, end] : busy) {
      if (offset + r.bytes <= begin)
        break; // fits in the gap before this range
      offset = std::max(offset, align(end));
    }
    placed.push_back({i, offset});
    plan.arenaBytes = std::max(plan.arenaBytes, align(offset + r.bytes));
  }
  for (auto &[i, off] : placed)
    plan.buffers.push_back({requests[i].value, off, requests[i].bytes});
  std::sort(plan.buffers.begin(), plan.buffers.end(),
            [](const BufferPlacement &a, const BufferPlacement &b) { return a.value < b.value; });
  return plan;
}

octet::LivePeak octet::livePeak(const std::vector<BufferRequest> &requests, int64_t alignment) {
  auto align = [&](int64_t v) { return (v + alignment - 1) / alignment * alignment; };
  // Bytes alive at each op: +bytes where a buffer starts, -bytes after its last reader. An input
  // (first -1) is alive from op 0.
  std::vector<std::pair<int, int64_t>> events;
  for (const BufferRequest &r : requests) {
    events.push_back({std::max(r.first, 0), align(r.bytes)});
    events.push_back({std::max(r.last, std::max(r.first, 0)) + 1, -align(r.bytes)});
  }
  std::sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first < b.first : a.second < b.second; // frees first at an op
  });
  LivePeak peak;
  int64_t live = 0;
  for (size_t i = 0; i < events.size();) {
    int at = events[i].first;
    for (; i < events.size() && events[i].first == at; ++i)
      live += events[i].second;
    if (live > peak.bytes) {
      peak.bytes = live;
      peak.op = at;
    }
  }
  for (size_t i = 0; i < requests.size(); ++i)
    if (std::max(requests[i].first, 0) <= peak.op && peak.op <= std::max(requests[i].last, std::max(requests[i].first, 0)))
      peak.alive.push_back(i);
  std::stable_sort(peak.alive.begin(), peak.alive.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  return peak;
}
