// hone-ptx: parse, print and analyze PTX modules.
#include "ptx/analysis.hpp"
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

using namespace hone;

constexpr const char* k_info_schema = "hone.ptx.info/1";

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(path + ": read error");
  return ss.str();
}

Result<ptx::Module> load(const std::string& path) {
  auto text = read_file(path);
  if (!text) return text.error();
  return ptx::parse(*text, path);
}

nlohmann::json info_json(const std::string& path, const ptx::Module& m) {
  nlohmann::json j;
  j["schema"] = k_info_schema;
  j["file"] = path;
  j["version"] = std::to_string(m.version_major) + "." + std::to_string(m.version_minor);
  j["target"] = nlohmann::json::array();
  for (auto t : m.target) j["target"].push_back(std::string(t));
  j["address_size"] = m.address_size;
  j["entries"] = nlohmann::json::array();
  for (const auto& e : ptx::analyze(m)) {
    nlohmann::json je;
    je["name"] = e.name;
    je["param_bytes"] = e.param_bytes;
    je["params"] = nlohmann::json::array();
    for (const auto& p : e.params) {
      nlohmann::json jp{{"name", p.name},
                        {"type", std::string(ptx::type_name(p.type))},
                        {"size", p.size},
                        {"align", p.align},
                        {"offset", p.offset},
                        {"aggregate", p.aggregate},
                        {"pointer", p.is_pointer()},
                        {"access", p.is_pointer() ? ptx::access_string(p.access()) : "-"},
                        {"address_taken", p.address_taken}};
      jp["pointers"] = nlohmann::json::array();
      for (const auto& u : p.pointers) {
        jp["pointers"].push_back({{"offset", u.offset},
                                  {"access", ptx::access_string(u.access)},
                                  {"escapes", u.escapes}});
      }
      je["params"].push_back(jp);
    }
    nlohmann::json r;
    r["static_shared_bytes"] = e.static_shared_bytes;
    r["dynamic_shared"] = e.dynamic_shared;
    r["local_bytes"] = e.local_bytes;
    r["instructions"] = e.instructions;
    r["registers_total"] = e.total_registers;
    r["registers"] = nlohmann::json::object();
    for (const auto& rc : e.registers) r["registers"][std::string(ptx::type_name(rc.type))] = rc.count;
    r["special_registers"] = e.special_registers;
    r["callees"] = e.callees;
    r["uses"] = {{"barrier", e.uses_barrier},           {"shuffle", e.uses_shuffle},
                 {"vote", e.uses_vote},                 {"match", e.uses_match},
                 {"atomics_global", e.uses_atomics_global},
                 {"atomics_shared", e.uses_atomics_shared},
                 {"fp64", e.uses_fp64},                 {"fp16", e.uses_fp16},
                 {"texture", e.uses_texture},           {"opaque_instructions", e.has_opaque}};
    if (e.maxntid) r["maxntid"] = *e.maxntid;
    if (e.reqntid) r["reqntid"] = *e.reqntid;
    if (e.minnctapersm) r["minnctapersm"] = *e.minnctapersm;
    if (e.maxnreg) r["maxnreg"] = *e.maxnreg;
    je["resources"] = r;
    j["entries"].push_back(je);
  }
  return j;
}

void info_text(const ptx::Module& m) {
  std::printf("PTX %u.%u, target", m.version_major, m.version_minor);
  for (auto t : m.target) std::printf(" %.*s", int(t.size()), t.data());
  std::printf(", address size %u\n", m.address_size);
  auto entries = ptx::analyze(m);
  if (entries.empty()) std::printf("no entries\n");
  for (const auto& e : entries) {
    std::printf("\nentry %s: %zu params, %u bytes\n", e.name.c_str(), e.params.size(), e.param_bytes);
    if (!e.params.empty()) {
      std::printf("  %-28s %6s %4s %5s %-6s %-8s %s\n", "param", "offset", "size", "align", "type",
                  "kind", "access");
    }
    for (const auto& p : e.params) {
      std::string kind = p.is_pointer() ? (p.aggregate ? "struct*" : "pointer")
                                        : (p.aggregate ? "struct" : "scalar");
      std::string access = p.is_pointer() ? ptx::access_string(p.access()) : "-";
      if (p.aggregate && p.is_pointer()) {
        access.clear();
        for (const auto& u : p.pointers) {
          if (!access.empty()) access += ",";
          access += "+" + std::to_string(u.offset) + ":" + ptx::access_string(u.access);
        }
      }
      if (p.address_taken) access += " (address taken)";
      std::printf("  %-28s %6u %4u %5u %-6s %-8s %s\n", p.name.c_str(), p.offset, p.size, p.align,
                  std::string(ptx::type_name(p.type)).c_str(), kind.c_str(), access.c_str());
    }
    std::printf("  shared: %llu bytes static%s; local: %llu bytes; %u instructions\n",
                (unsigned long long)e.static_shared_bytes,
                e.dynamic_shared ? ", plus dynamic" : "", (unsigned long long)e.local_bytes,
                e.instructions);
    std::printf("  registers: %u", e.total_registers);
    for (size_t i = 0; i < e.registers.size(); ++i) {
      auto tn = ptx::type_name(e.registers[i].type);
      std::printf("%s.%.*s %u", i ? ", " : " (", int(tn.size()), tn.data(), e.registers[i].count);
    }
    std::printf("%s\n", e.registers.empty() ? "" : ")");
    std::string uses;
    auto add = [&](bool b, const char* s) {
      if (b) uses += std::string(uses.empty() ? "" : " ") + s;
    };
    add(e.uses_barrier, "barrier");
    add(e.uses_shuffle, "shuffle");
    add(e.uses_vote, "vote");
    add(e.uses_match, "match");
    add(e.uses_atomics_global, "atomics(global)");
    add(e.uses_atomics_shared, "atomics(shared)");
    add(e.uses_fp64, "fp64");
    add(e.uses_fp16, "fp16");
    add(e.uses_texture, "texture");
    add(e.has_opaque, "opaque-instructions");
    std::printf("  uses: %s\n", uses.empty() ? "-" : uses.c_str());
    if (!e.special_registers.empty()) {
      std::printf("  special registers:");
      for (const auto& s : e.special_registers) std::printf(" %s", s.c_str());
      std::printf("\n");
    }
    if (!e.callees.empty()) {
      std::printf("  calls:");
      for (const auto& s : e.callees) std::printf(" %s", s.c_str());
      std::printf("\n");
    }
    if (e.maxntid) {
      std::printf("  .maxntid %lld, %lld, %lld\n", (long long)(*e.maxntid)[0],
                  (long long)(*e.maxntid)[1], (long long)(*e.maxntid)[2]);
    }
    if (e.reqntid) {
      std::printf("  .reqntid %lld, %lld, %lld\n", (long long)(*e.reqntid)[0],
                  (long long)(*e.reqntid)[1], (long long)(*e.reqntid)[2]);
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"hone-ptx: parse, print and analyze PTX modules (nvcc/NVRTC output, ISA 8.x-9.x)"};
  app.require_subcommand(1);
  std::string file;
  bool json = false;

  auto* print_cmd = app.add_subcommand("print", "Parse FILE and print it back as PTX");
  print_cmd->add_option("FILE", file, "PTX file")->required();

  auto* info_cmd = app.add_subcommand(
      "info", "Entries, parameters (type, size, offset, pointer-ness, access) and resources");
  info_cmd->add_option("FILE", file, "PTX file")->required();
  info_cmd->add_flag("--json", json, "Machine-readable output (schema hone.ptx.info/1)");

  auto* check_cmd = app.add_subcommand("check", "Parse FILE; exit 0 if it is well formed");
  check_cmd->add_option("FILE", file, "PTX file")->required();

  CLI11_PARSE(app, argc, argv);

  auto module = load(file);
  if (!module) {
    std::fprintf(stderr, "hone-ptx: %s\n", module.error().message.c_str());
    return 1;
  }
  if (print_cmd->parsed()) {
    std::fputs(ptx::print(*module).c_str(), stdout);
  } else if (info_cmd->parsed()) {
    if (json) {
      std::cout << info_json(file, *module).dump(2) << "\n";
    } else {
      info_text(*module);
    }
  }
  return 0;
}
