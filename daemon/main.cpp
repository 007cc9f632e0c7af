// honed: the hone daemon. Runs in the foreground, as systemd expects (Type=notify).
#include "common/version.hpp"
#include "config/config.hpp"
#include "daemon/daemon.hpp"
#include "daemon/worker/worker.hpp"
#include "store/store.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <iostream>

namespace {

using namespace hone;

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("honed");
  // journald stamps every line itself; a terminal gets the time.
  if (std::getenv("JOURNAL_STREAM")) {
    logger->set_pattern("[%l] %v");
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e honed[%P] %^%l%$: %v");
  }
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::flush_on(spdlog::level::warn);
}

} // namespace

int main(int argc, char** argv) {
  // `honed worker --fd N --driver PATH`: the worker process honed starts for itself (one per GPU).
  if (argc > 1 && std::string_view(argv[1]) == "worker") {
    CLI::App w{"honed worker: compiles, validates and benchmarks candidates on the GPU for honed. "
               "Started by honed itself; not meant to be run by hand."};
    int fd = -1;
    std::string driver = "libcuda.so.1";
    w.add_option("--fd", fd, "Connected socket to honed")->required();
    w.add_option("--driver", driver, "The CUDA driver library to load");
    try {
      w.parse(argc - 1, argv + 1);
    } catch (const CLI::ParseError& e) {
      return w.exit(e);
    }
    return hone::worker::main(fd, driver);
  }
  CLI::App app{"honed: the hone daemon. Shims report to it; it optimizes and swaps their hot kernels."};
  app.set_version_flag("--version", std::string("honed ") + k_version);
  std::string config_path = config::k_default_path;
  bool config_given = false;
  bool check_config = false;
  config::Overrides overrides;
  std::string socket, state_dir, driver, log_level;
  app.add_option("--config", config_path, "Configuration file (default /etc/hone/hone.toml)")
      ->each([&](const std::string&) { config_given = true; });
  app.add_option("--socket", socket, "Unix socket to listen on (server.socket)");
  app.add_option("--state-dir", state_dir, "Directory of the store (store.state_dir)");
  app.add_option("--driver", driver, "libcuda.so.1 the workers load (worker.driver)");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (log.level)");
  app.add_flag("--check-config", check_config, "Validate the configuration and exit");
  app.footer("Environment: HONE_* variables override the file (config/hone.toml lists them); "
             "flags override both. Signals: SIGTERM stops gracefully, SIGHUP reloads the config.");
  CLI11_PARSE(app, argc, argv);
  if (!socket.empty()) overrides.socket = socket;
  if (!state_dir.empty()) overrides.state_dir = state_dir;
  if (!driver.empty()) overrides.driver = driver;
  if (!log_level.empty()) overrides.log_level = log_level;

  auto env = config::environment();
  config::Provenance provenance;
  auto cfg = config::load(config_path, !config_given, env, overrides, &provenance);
  if (!cfg) {
    std::cerr << "honed: " << cfg.error().message << "\n";
    return 2;
  }
  if (check_config) {
    std::cout << "honed: configuration OK ("
              << (cfg->source.empty() ? std::string("defaults") : cfg->source.string()) << ")\n"
              << "  socket     " << cfg->server.socket << "\n"
              << "  state dir  " << cfg->store.state_dir.string() << "\n"
              << "  driver     " << cfg->worker.driver << "\n"
              << "  log level  " << cfg->log.level << "\n";
    return 0;
  }
  setup_logging(cfg->log.level);

  auto store = store::Store::open(cfg->store.state_dir);
  if (!store) {
    spdlog::critical("store: {}", store.error().message);
    sd_notifyf(0, "STATUS=store: %s", store.error().message.c_str());
    return 1;
  }

  boost::asio::io_context io;
  daemon::Daemon honed(io, *cfg, std::move(*store));
  honed.set_provenance(std::move(provenance));
  if (auto r = honed.start(); !r) {
    spdlog::critical("{}", r.error().message);
    sd_notifyf(0, "STATUS=%s", r.error().message.c_str());
    return 1;
  }

  boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& e, int sig) {
        if (e) return;
        if (sig == SIGHUP) {
          sd_notify(0, "RELOADING=1");
          config::Provenance where;
          auto fresh = config::load(config_path, !config_given, config::environment(), overrides,
                                    &where);
          if (fresh) {
            honed.reload(*fresh, where);
          } else {
            spdlog::error("reload refused, keeping the running configuration: {}",
                          fresh.error().message);
          }
          sd_notify(0, "READY=1");
          signals.async_wait(on_signal);
          return;
        }
        spdlog::info("{}: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        sd_notify(0, "STOPPING=1");
        honed.stop();
        io.stop();
      };
  signals.async_wait(on_signal);

  // Watchdog pings and a status line for `systemctl status`.
  boost::asio::steady_timer tick(io);
  uint64_t watchdog_usec = 0;
  bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
  auto period = watchdog ? std::chrono::microseconds(watchdog_usec / 2) : std::chrono::microseconds(10'000'000);
  std::function<void(const boost::system::error_code&)> on_tick = [&](const boost::system::error_code& e) {
    if (e) return;
    if (watchdog) sd_notify(0, "WATCHDOG=1");
    sd_notifyf(0, "STATUS=%s", honed.status_line().c_str());
    tick.expires_after(period);
    tick.async_wait(on_tick);
  };
  tick.expires_after(period);
  tick.async_wait(on_tick);

  sd_notifyf(0, "READY=1\nSTATUS=%s", honed.status_line().c_str());
  spdlog::info("honed {} ready", k_version);
  io.run();
  spdlog::info("stopped");
  return 0;
}
