#include "agent/strategy.hpp"

namespace hone::agent {

namespace {

class Fixed final : public Session {
public:
  explicit Fixed(std::vector<Candidate> c) : m_candidates(std::move(c)) {}
  std::vector<Candidate> poll() override {
    m_done = true;
    return std::move(m_candidates);
  }
  bool done() const override { return m_done; }

private:
  std::vector<Candidate> m_candidates;
  bool m_done = false;
};

} // namespace

std::unique_ptr<Session> fixed_session(std::vector<Candidate> candidates) {
  return std::make_unique<Fixed>(std::move(candidates));
}

std::unique_ptr<Session> decline(const KernelTask& task, std::string why) {
  if (task.declined) *task.declined = std::move(why);
  return nullptr;
}

} // namespace hone::agent
