// cli/options.cpp — the global flags applied over OUTCORE_CONF.
#include "commands.hpp"

namespace outcore::cli {

Config make_config(const GlobalOptions& globals) {
    Config config = Config::from_environment();
    if (globals.device_budget) config.set("device_budget", *globals.device_budget);
    if (globals.host_budget) config.set("host_budget", *globals.host_budget);
    if (globals.backend) config.set("backend", *globals.backend);
    return config;
}

std::string device_selector(const GlobalOptions& globals) { return globals.backend.value_or(std::string()); }

}  // namespace outcore::cli
