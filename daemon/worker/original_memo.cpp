#include "daemon/worker/original_memo.hpp"

#include "common/wire.hpp"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace hone::worker {

uint64_t CaptureCheck::OriginalRuns::bytes() const {
  uint64_t n = 0;
  for (const auto* s : {&first, &second}) {
    for (const auto& r : s->regions) n += r.size();
  }
  for (const auto& s : spread) n += s.size();
  return n;
}

std::string OriginalMemo::key(const Job& job, size_t index, std::string_view data, uint64_t seed1,
                              uint64_t seed2) {
  wire::Writer w;
  w.u8(uint8_t(job.original_format));
  w.str(job.original_entry);
  w.u64(seed1);
  w.u64(seed2);
  encode(w, job.captures[index]);
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_128bits_reset(&st);
  XXH3_128bits_update(&st, job.original_image.data(), job.original_image.size());
  XXH3_128bits_update(&st, w.out().data(), w.out().size());
  XXH3_128bits_update(&st, data.data(), data.size());
  XXH128_hash_t h = XXH3_128bits_digest(&st);
  return std::string(reinterpret_cast<const char*>(&h), sizeof h);
}

std::shared_ptr<const CaptureCheck::OriginalRuns> OriginalMemo::find(const std::string& key) {
  for (auto it = m_entries.begin(); it != m_entries.end(); ++it) {
    if (it->key != key) continue;
    m_entries.splice(m_entries.begin(), m_entries, it);
    return m_entries.front().runs;
  }
  return nullptr;
}

void OriginalMemo::keep(const std::string& key,
                        std::shared_ptr<const CaptureCheck::OriginalRuns> runs) {
  for (auto it = m_entries.begin(); it != m_entries.end(); ++it) {
    if (it->key == key) {
      m_bytes -= it->bytes;
      m_entries.erase(it);
      break;
    }
  }
  uint64_t bytes = runs->bytes();
  if (bytes > m_max_bytes) return;
  while (!m_entries.empty() && m_bytes + bytes > m_max_bytes) {
    m_bytes -= m_entries.back().bytes;
    m_entries.pop_back();
  }
  m_entries.push_front({key, std::move(runs), bytes});
  m_bytes += bytes;
}

} // namespace hone::worker
