// honectl against a real honed: exit codes, export and import of variants between two hosts'
// state directories, variant switches, and doctor.
#include "common/version.hpp"
#include "daemon_process.hpp"
#include "store/store.hpp"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>

using namespace hone;
using namespace hone::test;
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_config = "[server]\nreport_interval_ms = 1500\n";
const std::string k_emu_driver = std::string(HONE_BINARY_DIR) + "/lib/emu/libcuda.so.1";

std::unique_ptr<DaemonProcess> start_daemon(DaemonOptions o = {}) {
  if (!o.config) o.config = k_config;
  auto d = DaemonProcess::start(std::move(o));
  if (!d) {
    ADD_FAILURE() << d.error().message;
    return nullptr;
  }
  return std::move(*d);
}

void expect_clean_stop(DaemonProcess& d) {
  auto status = d.stop();
  ASSERT_TRUE(status) << status.error().message;
  EXPECT_EQ(*status, 0) << d.log();
  EXPECT_FALSE(fs::exists(fs::symlink_status(d.socket())));
}

// A verified variant, as the optimizer would leave it in the store.
store::VariantRecord make_variant(const std::string& arch) {
  const char ptx[] =
      ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n";
  store::VariantRecord v;
  v.kernel = KernelKey{ImageHash::of("original image", 14), "_Z6reducePKfPfi"};
  v.arch = arch;
  v.driver_major = 13;
  v.strategy = "rejit";
  v.format = proto::ImageFormat::ptx;
  v.image.assign(ptx, sizeof ptx);
  v.entry = "_Z6reducePKfPfi";
  v.jit_options = {"CU_JIT_OPTIMIZATION_LEVEL=4"};
  v.guard.block = {256, 1, 1};
  v.state = store::VariantState::verified;
  v.speedup = 1.37;
  v.noise = 0.02;
  v.verdict = "verified";
  v.evidence_json = R"({"inputs": 3, "comparisons": "bitwise", "runs": 2})";
  v.created = int64_t(std::time(nullptr));
  v.id = store::variant_id_of(v);
  return v;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

} // namespace

// attach-service writes a drop-in that preloads the library (keeping the service's own
// LD_PRELOAD) and adds the group; detach-service removes it; both say how to apply the change.
TEST(Honectl, AttachAndDetachAService) {
  TempDir root("honectl-units");
  const fs::path units = root.path() / "etc/systemd/system";
  const fs::path vendor = root.path() / "usr/lib/systemd/system";
  fs::create_directories(units);
  fs::create_directories(vendor);
  // a packaged service that preloads a library of its own in a drop-in of the vendor's
  std::ofstream(vendor / "infer.service")
      << "[Unit]\nDescription=an inference server\n[Service]\nExecStart=/usr/bin/infer\n"
         "Environment=\"LD_PRELOAD=/opt/jemalloc.so\" OMP_NUM_THREADS=8\n";
  fs::create_directories(vendor / "infer.service.d");
  std::ofstream(vendor / "infer.service.d/10-tuning.conf")
      << "[Service]\nEnvironment=LD_PRELOAD=/opt/tcmalloc.so\n";
  const std::string lib = "/usr/lib/hone/libhone.so";
  const std::vector<std::string> where = {"--root", root.path().string(), "--library", lib};
  auto args = [&](std::vector<std::string> a) {
    // detach-service takes only --root
    a.insert(a.end(), where.begin(), a[0] == "detach-service" ? where.begin() + 2 : where.end());
    return a;
  };

  auto r = run_honectl(args({"attach-service", "infer"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dropin = units / "infer.service.d/hone.conf";
  std::string text = read_file(dropin);
  // the drop-in of the vendor's comes last, so its LD_PRELOAD is the one the service has
  EXPECT_NE(text.find("[Service]\nEnvironment=\"LD_PRELOAD=" + lib + ":/opt/tcmalloc.so\"\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\nSupplementaryGroups=hone\n"), std::string::npos) << text;
  EXPECT_NE(r.out.find("Wrote " + dropin.string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keeps the service's LD_PRELOAD=/opt/tcmalloc.so"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("systemctl daemon-reload && systemctl restart infer.service"), std::string::npos)
      << r.out;
  struct stat st{};
  ASSERT_EQ(::stat(dropin.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);

  // Again: nothing changes (the library is not added twice), with or without ".service".
  r = run_honectl(args({"attach-service", "infer.service"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("attached already"), std::string::npos) << r.out;
  EXPECT_EQ(read_file(dropin), text);

  // A unit that reads an EnvironmentFile is attached with a warning: the file would win.
  std::ofstream(units / "batch.service")
      << "[Service]\nExecStart=/usr/bin/batch\nEnvironmentFile=-/etc/default/batch\n";
  r = run_honectl(args({"attach-service", "batch", "--group", "gpu-tools"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("warning: the service reads EnvironmentFile=-/etc/default/batch"),
            std::string::npos)
      << r.out;
  text = read_file(units / "batch.service.d/hone.conf");
  EXPECT_NE(text.find("Environment=\"LD_PRELOAD=" + lib + "\"\n"), std::string::npos) << text;
  EXPECT_NE(text.find("SupplementaryGroups=gpu-tools\n"), std::string::npos) << text;

  // Refused: a unit that does not exist, one that is not a service, a bad name, a drop-in of the
  // same name that honectl did not write (left untouched).
  r = run_honectl(args({"attach-service", "nosuch"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no unit nosuch.service"), std::string::npos) << r.err;
  r = run_honectl(args({"attach-service", "infer.socket"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is a socket unit"), std::string::npos) << r.err;
  r = run_honectl(args({"attach-service", "in fer"}));
  EXPECT_EQ(r.exit_code, 2);
  r = run_honectl({"attach-service", "infer", "--root", root.path().string(), "--library", "rel.so"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("absolute path"), std::string::npos) << r.err;
  std::ofstream(units / "batch.service.d/hone.conf", std::ios::trunc) << "[Service]\nNice=5\n";
  r = run_honectl(args({"attach-service", "batch"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("was not written by honectl"), std::string::npos) << r.err;
  r = run_honectl(args({"detach-service", "batch"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(read_file(units / "batch.service.d/hone.conf"), "[Service]\nNice=5\n");

  // detach-service removes the drop-in and its directory; a second time there is nothing to do.
  r = run_honectl(args({"detach-service", "infer"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Removed " + dropin.string()), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dropin.parent_path()));
  EXPECT_TRUE(fs::exists(vendor / "infer.service.d/10-tuning.conf"));
  r = run_honectl(args({"detach-service", "infer"}));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("is not attached"), std::string::npos) << r.out;
}

TEST(Honectl, ExitCodes) {
  TempDir dir("honectl-down");
  std::string gone = (dir.path() / "hone.sock").string();
  for (const char* cmd : {"status", "kernels", "metrics"}) {
    auto r = run_honectl({cmd, "--socket", gone});
    EXPECT_EQ(r.exit_code, 3) << cmd << ": " << r.err;
    EXPECT_NE(r.err.find("is honed running"), std::string::npos) << r.err;
  }
  // The default socket comes from HONE_SOCKET.
  RunOptions env;
  env.env["HONE_SOCKET"] = gone;
  auto from_env = run_honectl({"status"}, env);
  EXPECT_EQ(from_env.exit_code, 3);
  EXPECT_NE(from_env.err.find(gone), std::string::npos) << from_env.err;
  // A file that is not a socket, and a socket nobody listens on.
  { std::ofstream(dir.path() / "plain") << "x"; }
  EXPECT_EQ(run_honectl({"status", "--socket", (dir.path() / "plain").string()}).exit_code, 3);

  EXPECT_EQ(run_honectl({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_honectl({}).exit_code, 2);
  EXPECT_EQ(run_honectl({"status", "--no-such-flag"}).exit_code, 2);
  EXPECT_EQ(run_honectl({"show"}).exit_code, 2);
  auto help = run_honectl({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Exit status"), std::string::npos) << help.out;
  auto sub_help = run_honectl({"export", "--help"});
  EXPECT_EQ(sub_help.exit_code, 0);
  EXPECT_NE(sub_help.out.find("--force"), std::string::npos) << sub_help.out;
  EXPECT_NE(sub_help.out.find("Exit status"), std::string::npos) << sub_help.out;

  auto d = start_daemon();
  ASSERT_TRUE(d);
  auto unknown = run_honectl({"show", "no_such_kernel", "--socket", d->socket()});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("no kernel named no_such_kernel"), std::string::npos) << unknown.err;
  EXPECT_EQ(run_honectl({"disable", "no_such_kernel", "--socket", d->socket()}).exit_code, 1);
  EXPECT_EQ(run_honectl({"show", std::string(32, 'a'), "--socket", d->socket()}).exit_code, 1);
  auto version = run_honectl({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find(k_version), std::string::npos);
  expect_clean_stop(*d);
}

TEST(Honectl, ExportImportEmptyStoreAndGarbage) {
  auto d = start_daemon();
  ASSERT_TRUE(d);
  fs::path file = d->dir() / "variants.hone";
  auto e = run_honectl({"export", file.string(), "--socket", d->socket()});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("exported 0 verified variants"), std::string::npos) << e.out;
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(read_file(file).rfind("HONEVARS", 0), 0u);
  // No temporary file left next to it.
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(d->dir()))
    entries += entry.path().filename().string()[0] == '.';
  EXPECT_EQ(entries, 0u);

  auto again = run_honectl({"export", file.string(), "--socket", d->socket()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  auto forced =
      run_honectl({"export", file.string(), "--force", "--json", "--socket", d->socket()});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(json::parse(forced.out)["variants"], 0);

  auto i = run_honectl({"import", file.string(), "--socket", d->socket()});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("imported 0 variants"), std::string::npos) << i.out;

  fs::path garbage = d->dir() / "garbage.hone";
  { std::ofstream(garbage) << "this is not an export file\n"; }
  auto g = run_honectl({"import", garbage.string(), "--socket", d->socket()});
  EXPECT_EQ(g.exit_code, 1);
  EXPECT_NE(g.err.find("cannot import"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("nothing was imported"), std::string::npos) << g.err;
  auto missing = run_honectl({"import", (d->dir() / "nope").string(), "--socket", d->socket()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("No such file"), std::string::npos) << missing.err;
  expect_clean_stop(*d);
}

TEST(Honectl, VariantRoundTripBetweenTwoHosts) {
  TempDir host_a("honectl-a"), host_b("honectl-b");
  store::VariantRecord v90 = make_variant("sm_90");
  store::VariantRecord v80 = make_variant("sm_80");
  {
    auto st = store::Store::open(host_a.path() / "state");
    ASSERT_TRUE(st) << st.error().message;
    ASSERT_TRUE((*st)->put_variant(v90));
    ASSERT_TRUE((*st)->put_variant(v80));
  }
  DaemonOptions oa;
  oa.dir = host_a.path();
  auto a = start_daemon(oa);
  ASSERT_TRUE(a);
  std::string id = v90.id.hex();

  auto list = run_honectl({"variants", "--socket", a->socket()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find(id.substr(0, 12)), std::string::npos) << list.out;
  EXPECT_EQ(list.out.find(id), std::string::npos) << "tables show 12 digits: " << list.out;
  EXPECT_NE(list.out.find("1.37x"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("rejit"), std::string::npos) << list.out;
  auto list_json = run_honectl({"variants", "--json", "--socket", a->socket()});
  ASSERT_EQ(list_json.exit_code, 0);
  json lj = json::parse(list_json.out);
  EXPECT_EQ(lj["schema"], "hone.variants/1");
  EXPECT_EQ(lj["variants"].size(), 2u);

  auto status = run_honectl({"status", "--socket", a->socket()});
  ASSERT_EQ(status.exit_code, 0);
  EXPECT_NE(status.out.find("2 verified"), std::string::npos) << status.out;

  // show by a 12-digit prefix, as the table prints it.
  auto show = run_honectl({"show", id.substr(0, 12), "--socket", a->socket()});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find(id), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("\"comparisons\": \"bitwise\""), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("block 256x1x1"), std::string::npos) << show.out;

  // Only sm_90's variant goes to the file.
  fs::path file = host_a.path() / "sm90.hone";
  auto e = run_honectl({"export", file.string(), "--arch", "sm_90", "--socket", a->socket()});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(e.out.find("exported 1 verified variant for sm_90"), std::string::npos) << e.out;

  DaemonOptions ob;
  ob.dir = host_b.path();
  auto b = start_daemon(ob);
  ASSERT_TRUE(b);
  auto i = run_honectl({"import", file.string(), "--json", "--socket", b->socket()});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  json ij = json::parse(i.out);
  EXPECT_EQ(ij["imported"], 1);
  EXPECT_EQ(ij["rejected"], 0);
  auto twice = run_honectl({"import", file.string(), "--json", "--socket", b->socket()});
  ASSERT_EQ(twice.exit_code, 0);
  EXPECT_EQ(json::parse(twice.out)["already_present"], 1);
  auto vb = run_honectl({"variants", "--json", "--socket", b->socket()});
  json vj = json::parse(vb.out);
  ASSERT_EQ(vj["variants"].size(), 1u);
  EXPECT_EQ(vj["variants"][0]["id"], id);
  EXPECT_EQ(vj["variants"][0]["state"], "imported"); // re-validated before it serves
  EXPECT_EQ(vj["variants"][0]["kernel"], v90.kernel.str());
  // variants KERNEL filters by the kernel's key.
  auto of = run_honectl({"variants", v90.kernel.str(), "--json", "--socket", b->socket()});
  EXPECT_EQ(json::parse(of.out)["variants"].size(), 1u);

  // Switch a variant off and on, then evict it.
  auto off = run_honectl({"disable", id, "--json", "--socket", a->socket()});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(json::parse(off.out)["state"], "disabled");
  auto on = run_honectl({"enable", id.substr(0, 10), "--socket", a->socket()});
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("verified"), std::string::npos) << on.out;
  auto evict = run_honectl({"evict", id, "--socket", a->socket()});
  ASSERT_EQ(evict.exit_code, 0) << evict.err;
  EXPECT_NE(evict.out.find("evicted 1 variant"), std::string::npos) << evict.out;
  auto gone = run_honectl({"show", id, "--socket", a->socket()});
  EXPECT_EQ(gone.exit_code, 1);
  expect_clean_stop(*a);
  expect_clean_stop(*b);
}

TEST(Honectl, Doctor) {
  TempDir dir("honectl-doctor");
  DaemonOptions o;
  o.dir = dir.path();
  auto d = start_daemon(o);
  ASSERT_TRUE(d);
  std::string config = d->config_path().string();
  bool have_emu = fs::exists(k_emu_driver);

  auto up = run_honectl({"doctor", "--socket", d->socket(), "--config", config, "--driver",
                         have_emu ? k_emu_driver : "/no/such/libcuda.so.1"});
  EXPECT_EQ(up.exit_code, have_emu ? 0 : 4) << up.out << up.err;
  EXPECT_NE(up.out.find("OK    socket"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("OK    daemon  honed " + std::string(k_version)), std::string::npos)
      << up.out;
  EXPECT_NE(up.out.find("OK    store"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("OK    config  " + config), std::string::npos) << up.out;
  if (have_emu) {
    EXPECT_NE(up.out.find("OK    driver"), std::string::npos) << up.out;
    EXPECT_NE(up.out.find("1 device"), std::string::npos) << up.out;
  }

  // A driver that does not load is a failure that says what to do.
  auto no_driver = run_honectl({"doctor", "--json", "--socket", d->socket(), "--config", config,
                                "--driver", "/no/such/libcuda.so.1"});
  EXPECT_EQ(no_driver.exit_code, 4);
  json j = json::parse(no_driver.out);
  EXPECT_EQ(j["schema"], "hone.doctor/1");
  EXPECT_EQ(j["ok"], false);
  bool driver_failed = false;
  for (const auto& c : j["checks"]) {
    if (c["check"] == "driver") {
      driver_failed = c["status"] == "FAIL" && !c["fix"].get<std::string>().empty();
    }
  }
  EXPECT_TRUE(driver_failed) << no_driver.out;

  // A broken config is reported verbatim.
  fs::path bad = dir.path() / "bad.toml";
  { std::ofstream(bad) << "[server]\nsocket_mode = 660\n"; }
  auto bad_config = run_honectl(
      {"doctor", "--socket", d->socket(), "--config", bad.string(), "--driver", k_emu_driver});
  EXPECT_EQ(bad_config.exit_code, 4);
  EXPECT_NE(bad_config.out.find("FAIL  config  " + bad.string() + ":2"), std::string::npos)
      << bad_config.out;

  // honed down: the socket and daemon fail; the store is read directly with --state-dir.
  expect_clean_stop(*d);
  auto down = run_honectl({"doctor", "--socket", d->socket(), "--config", config, "--driver",
                           k_emu_driver, "--state-dir", d->state_dir().string()});
  EXPECT_EQ(down.exit_code, 4) << down.out;
  EXPECT_NE(down.out.find("FAIL  socket"), std::string::npos) << down.out;
  EXPECT_NE(down.out.find("FAIL  daemon"), std::string::npos) << down.out;
  EXPECT_NE(down.out.find("OK    store   " + d->state_dir().string() + " (read directly"),
            std::string::npos)
      << down.out;
  auto no_store = run_honectl({"doctor", "--socket", d->socket(), "--config", config, "--driver",
                               k_emu_driver, "--state-dir", (dir.path() / "nothing").string()});
  EXPECT_NE(no_store.out.find("FAIL  store"), std::string::npos) << no_store.out;
}
