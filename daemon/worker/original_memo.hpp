// What the original kernel showed on a capture, kept across jobs (DESIGN.md, "Validation
// (worker)"). Every candidate for a kernel is validated on the same captures under the same
// seeds, and the original's runs there (which bytes it writes, whether it is deterministic, its
// results) do not depend on the candidate: the worker runs them for the first job and keeps them,
// within a byte budget, for the jobs after it. Only the worker process holds them; a new worker
// starts empty.
#pragma once

#include "common/job.hpp"
#include "daemon/worker/capture_check.hpp"

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>

namespace hone::worker {

class OriginalMemo {
public:
  // At most `max_bytes` of results kept (least recently used dropped first); an entry larger than
  // that is not kept.
  explicit OriginalMemo(uint64_t max_bytes) : m_max_bytes(max_bytes) {}

  // Names the original image and entry, capture `index` of `job` (its launch, parameters, buffers
  // and bytes) and the two seeds.
  static std::string key(const Job& job, size_t index, std::string_view data, uint64_t seed1,
                         uint64_t seed2);

  std::shared_ptr<const CaptureCheck::OriginalRuns> find(const std::string& key);
  void keep(const std::string& key, std::shared_ptr<const CaptureCheck::OriginalRuns> runs);

  uint64_t bytes() const { return m_bytes; }
  size_t size() const { return m_entries.size(); }

private:
  struct Entry {
    std::string key;
    std::shared_ptr<const CaptureCheck::OriginalRuns> runs;
    uint64_t bytes = 0;
  };
  uint64_t m_max_bytes;
  uint64_t m_bytes = 0;
  std::list<Entry> m_entries; // most recently used first
};

} // namespace hone::worker
