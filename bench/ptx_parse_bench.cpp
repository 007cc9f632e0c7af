// Parse throughput on a PTX text of at least 20 MB made from the corpus (tests/kernels compiled by
// nvcc and NVRTC for three architectures), on one core. Target: at least 100 MB/s.
#include "corpus.hpp"
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

using namespace hone;
using Clock = std::chrono::steady_clock;

namespace {

// The corpus modules without their headers, repeated under one header until `min_bytes`.
std::string big_module(size_t min_bytes, size_t& modules) {
  std::vector<std::string> bodies;
  for (const auto& b : test::all_builds()) {
    const auto& cm = test::compiled(b);
    if (!cm.error.empty()) {
      std::fprintf(stderr, "bench: %s\n", cm.error.c_str());
      std::exit(1);
    }
    std::istringstream in(cm.ptx);
    std::string line, body;
    while (std::getline(in, line)) {
      if (line.starts_with(".version") || line.starts_with(".target") ||
          line.starts_with(".address_size")) {
        continue;
      }
      body += line;
      body += '\n';
    }
    bodies.push_back(std::move(body));
  }
  std::string text = ".version 9.0\n.target sm_90\n.address_size 64\n\n";
  modules = 0;
  while (text.size() < min_bytes) {
    for (const auto& b : bodies) {
      text += b;
      ++modules;
    }
  }
  return text;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  size_t modules = 0;
  std::string text = big_module(20u << 20, modules);
  double mb = double(text.size()) / 1e6;
  std::printf("ptx parse bench: %.1f MB of PTX (%zu corpus modules), %d rounds, one thread\n", mb,
              modules, rounds);

  std::vector<double> parse_s, print_s, analyze_s;
  size_t instructions = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    auto m = ptx::parse(text, "bench.ptx");
    parse_s.push_back(seconds_since(t0));
    if (!m) {
      std::fprintf(stderr, "bench: %s\n", m.error().message.c_str());
      return 1;
    }
    t0 = Clock::now();
    auto printed = ptx::print(*m);
    print_s.push_back(seconds_since(t0));
    t0 = Clock::now();
    auto infos = ptx::analyze(*m);
    analyze_s.push_back(seconds_since(t0));
    instructions = 0;
    for (const auto& i : infos) instructions += i.instructions;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  double p = median(parse_s), pr = median(print_s), an = median(analyze_s);
  std::printf("parse:   median %.3f s  %7.1f MB/s  (best %.1f MB/s)  target >= 100 MB/s: %s\n", p,
              mb / p, mb / *std::min_element(parse_s.begin(), parse_s.end()),
              mb / p >= 100 ? "met" : "NOT met");
  std::printf("print:   median %.3f s  %7.1f MB/s\n", pr, mb / pr);
  std::printf("analyze: median %.3f s  %7.1f MB/s  (%zu entry instructions)\n", an, mb / an,
              instructions);
  return 0;
}
