#include "tools/honectl_service.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace hone::ctl {

namespace {

constexpr int k_ok = 0, k_failed = 1, k_usage = 2;
constexpr const char* k_dropin = "hone.conf";
constexpr const char* k_marker = "# Written by honectl attach-service";

// Where units and their drop-ins are read from, in systemd's order of precedence (a unit file in
// an earlier directory hides one of the same name in a later one).
constexpr const char* k_unit_dirs[] = {"etc/systemd/system", "run/systemd/system",
                                       "usr/local/lib/systemd/system", "usr/lib/systemd/system",
                                       "lib/systemd/system"};

// "vllm" and "vllm.service" name vllm.service; anything else that is not a unit name is refused.
std::optional<std::string> unit_of(const std::string& name, std::string& why) {
  std::string unit = name;
  const auto ends = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return unit.size() >= n && unit.compare(unit.size() - n, n, suffix) == 0;
  };
  if (!ends(".service")) {
    for (const char* other : {".socket", ".timer", ".target", ".mount", ".slice", ".scope", ".path",
                              ".device", ".swap", ".automount"}) {
      if (ends(other)) {
        why = "'" + name + "' is a " + std::string(other + 1) + " unit: only services run programs";
        return std::nullopt;
      }
    }
    unit += ".service";
  }
  const std::string base = unit.substr(0, unit.size() - 8);
  if (base.empty() || base.size() > 247) {
    why = "'" + name + "' is not a service name";
    return std::nullopt;
  }
  for (char c : base) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == ':' || c == '-' || c == '_' || c == '.' || c == '@' || c == '\\';
    if (!ok) {
      why = "'" + name + "' is not a service name (systemd allows letters, digits and :-_.@\\)";
      return std::nullopt;
    }
  }
  if (base.back() == '@') {
    why = "'" + name + "' is a template: name an instance of it (" + base + "NAME)";
    return std::nullopt;
  }
  return unit;
}

fs::path under(const std::string& root, const std::string& rel) {
  return fs::path(root.empty() ? "/" : root) / rel;
}

// The unit's file: the first directory holding it, or for an instance, its template's.
std::optional<fs::path> unit_file(const std::string& root, const std::string& unit) {
  std::vector<std::string> names{unit};
  if (auto at = unit.find('@'); at != std::string::npos) names.push_back(unit.substr(0, at + 1) + ".service");
  for (const std::string& n : names) {
    for (const char* d : k_unit_dirs) {
      std::error_code ec;
      fs::path p = under(root, d) / n;
      if (fs::exists(p, ec)) return p;
    }
  }
  return std::nullopt;
}

// The files whose [Service] settings make up the unit: its file, then its drop-ins in the order
// systemd applies them (by file name, across the directories; our own drop-in left out).
std::vector<fs::path> unit_sources(const std::string& root, const std::string& unit,
                                   const fs::path& file) {
  std::vector<fs::path> out{file};
  std::vector<std::string> dirs{unit + ".d"};
  if (auto at = unit.find('@'); at != std::string::npos) dirs.push_back(unit.substr(0, at + 1) + ".service.d");
  std::vector<std::pair<std::string, fs::path>> dropins;
  for (const std::string& dn : dirs) {
    for (const char* d : k_unit_dirs) {
      std::error_code ec;
      fs::path dir = under(root, d) / dn;
      if (!fs::is_directory(dir, ec)) continue;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (n.size() < 5 || n.compare(n.size() - 5, 5, ".conf") != 0) continue;
        if (n == k_dropin && d == std::string("etc/systemd/system")) continue;
        if (std::none_of(dropins.begin(), dropins.end(), [&](const auto& x) { return x.first == n; }))
          dropins.emplace_back(n, e.path());
      }
    }
  }
  std::sort(dropins.begin(), dropins.end());
  for (auto& [n, p] : dropins) out.push_back(p);
  return out;
}

// One Environment= value's assignments, as systemd splits them: words separated by spaces,
// double or single quotes around a word.
std::vector<std::string> env_words(const std::string& value) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    char c = value[i];
    if (quote) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && i + 1 < value.size()) {
        cur += value[++i];
      } else {
        cur += c;
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) out.push_back(cur);
  return out;
}

struct Found {
  std::optional<std::string> preload; // the service's LD_PRELOAD from Environment=, if it sets one
  std::vector<std::string> environment_files; // EnvironmentFile= lines (they override Environment=)
};

Found read_service(const std::vector<fs::path>& sources) {
  Found f;
  for (const fs::path& p : sources) {
    std::ifstream in(p);
    std::string line, section;
    while (std::getline(in, line)) {
      size_t b = line.find_first_not_of(" \t");
      if (b == std::string::npos || line[b] == '#' || line[b] == ';') continue;
      line = line.substr(b);
      if (line[0] == '[') {
        section = line.substr(0, line.find(']') + 1);
        continue;
      }
      if (section != "[Service]") continue;
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string key = line.substr(0, eq);
      key.erase(key.find_last_not_of(" \t") + 1);
      std::string value = line.substr(eq + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      if (key == "Environment") {
        if (value.empty()) {
          f.preload.reset(); // an empty assignment resets the list
          continue;
        }
        for (const std::string& w : env_words(value)) {
          if (w.rfind("LD_PRELOAD=", 0) == 0) f.preload = w.substr(11);
        }
      } else if (key == "EnvironmentFile") {
        if (value.empty()) f.environment_files.clear();
        else f.environment_files.push_back(value + " (" + p.string() + ")");
      }
    }
  }
  return f;
}

// LD_PRELOAD holds paths separated by colons or spaces.
bool preloads(const std::string& list, const std::string& library) {
  std::string cur;
  for (char c : list + ":") {
    if (c == ':' || c == ' ') {
      if (cur == library) return true;
      cur.clear();
    } else {
      cur += c;
    }
  }
  return false;
}

// Quoted for an Environment= line: backslashes and double quotes escaped.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void print_apply(const std::string& root, const std::string& unit) {
  if (root != "/" && !root.empty()) {
    std::cout << "The units are under " << root << ": apply there with\n  systemctl daemon-reload && "
              << "systemctl restart " << unit << "\n";
    return;
  }
  std::cout << "To apply it:\n  systemctl daemon-reload && systemctl restart " << unit << "\n";
}

} // namespace

std::string installed_shim_path() {
#ifdef HONE_SHIM_INSTALL_PATH
  return HONE_SHIM_INSTALL_PATH;
#else
  return "/usr/lib/hone/libhone.so";
#endif
}

int attach_service(const ServiceOptions& o) {
  std::string why;
  auto unit = unit_of(o.name, why);
  if (!unit) {
    std::cerr << "honectl: " << why << "\n";
    return k_usage;
  }
  const std::string library = o.library.empty() ? installed_shim_path() : o.library;
  if (library.empty() || library[0] != '/' ||
      library.find_first_of(" :\"\\\n") != std::string::npos) {
    std::cerr << "honectl: the library must be an absolute path without spaces, colons or quotes: '"
              << library << "'\n";
    return k_usage;
  }
  if (o.group.empty() || o.group.find_first_of(" \t\n\"'\\") != std::string::npos) {
    std::cerr << "honectl: '" << o.group << "' is not a group name\n";
    return k_usage;
  }
  auto file = unit_file(o.root, *unit);
  if (!file) {
    std::cerr << "honectl: no unit " << *unit << " under " << o.root
              << " (looked in /etc/systemd/system, /run/systemd/system, /usr/local/lib/systemd/system, "
                 "/usr/lib/systemd/system, /lib/systemd/system); check the name with "
                 "`systemctl list-unit-files '*.service'`\n";
    return k_failed;
  }
  std::error_code ec;
  if (!fs::exists(under(o.root, library.substr(1)), ec)) {
    std::cerr << "honectl: warning: " << library
              << " does not exist (yet): the service will start without hone until it does\n";
  }
  const Found found = read_service(unit_sources(o.root, *unit, *file));
  std::string preload = library;
  if (found.preload && !found.preload->empty()) {
    preload = preloads(*found.preload, library) ? *found.preload : library + ":" + *found.preload;
  }
  const fs::path dir = under(o.root, "etc/systemd/system") / (*unit + ".d");
  const fs::path path = dir / k_dropin;
  std::ostringstream text;
  text << k_marker << " (`honectl detach-service " << unit->substr(0, unit->size() - 8)
       << "` removes it): preload hone's\n"
       << "# library into the service, and let it reach honed's socket.\n"
       << "[Service]\n"
       << "Environment=" << quoted("LD_PRELOAD=" + preload) << "\n"
       << "SupplementaryGroups=" << o.group << "\n";
  std::string old;
  bool existed = fs::exists(path, ec);
  if (existed) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    old = ss.str();
    if (old.rfind(k_marker, 0) != 0) {
      std::cerr << "honectl: " << path.string()
                << " exists and was not written by honectl; move it away first\n";
      return k_failed;
    }
  }
  if (existed && old == text.str()) {
    std::cout << *unit << " is attached already (" << path.string() << "); nothing changed\n";
    return k_ok;
  }
  fs::create_directories(dir, ec);
  if (ec) {
    std::cerr << "honectl: cannot create " << dir.string() << ": " << ec.message() << "\n";
    return k_failed;
  }
  const fs::path tmp = dir / (std::string(".") + k_dropin + ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text.str();
    out.close();
    if (!out) {
      std::cerr << "honectl: cannot write " << tmp.string() << ": " << std::strerror(errno) << "\n";
      fs::remove(tmp, ec);
      return k_failed;
    }
  }
  fs::permissions(tmp, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                           fs::perms::others_read, ec);
  fs::rename(tmp, path, ec);
  if (ec) {
    std::cerr << "honectl: cannot write " << path.string() << ": " << ec.message() << "\n";
    fs::remove(tmp, ec);
    return k_failed;
  }
  std::cout << (existed ? "Updated " : "Wrote ") << path.string() << ":\n";
  std::cout << "  Environment=" << quoted("LD_PRELOAD=" + preload);
  if (found.preload && !found.preload->empty() && !preloads(*found.preload, library))
    std::cout << "   (keeps the service's LD_PRELOAD=" << *found.preload << ")";
  std::cout << "\n  SupplementaryGroups=" << o.group << "\n";
  for (const std::string& e : found.environment_files) {
    std::cout << "warning: the service reads EnvironmentFile=" << e
              << "; an LD_PRELOAD set there overrides this one: add " << library
              << " to it there instead\n";
  }
  print_apply(o.root, *unit);
  return k_ok;
}

int detach_service(const ServiceOptions& o) {
  std::string why;
  auto unit = unit_of(o.name, why);
  if (!unit) {
    std::cerr << "honectl: " << why << "\n";
    return k_usage;
  }
  const fs::path dir = under(o.root, "etc/systemd/system") / (*unit + ".d");
  const fs::path path = dir / k_dropin;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    std::cout << *unit << " is not attached (no " << path.string() << "); nothing changed\n";
    return k_ok;
  }
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  if (first.rfind(k_marker, 0) != 0) {
    std::cerr << "honectl: " << path.string()
              << " was not written by honectl attach-service; left as it is\n";
    return k_failed;
  }
  if (!fs::remove(path, ec) || ec) {
    std::cerr << "honectl: cannot remove " << path.string() << ": " << ec.message() << "\n";
    return k_failed;
  }
  std::cout << "Removed " << path.string() << "\n";
  if (fs::is_empty(dir, ec) && !ec && fs::remove(dir, ec)) std::cout << "Removed " << dir.string() << "\n";
  print_apply(o.root, *unit);
  return k_ok;
}

} // namespace hone::ctl
