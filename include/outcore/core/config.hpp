// outcore/core/config.hpp — settings from OUTCORE_CONF, overridden by CLI flags.
//
//   OUTCORE_CONF="device_budget=4GiB,host_budget=16GiB,spill_dir=/var/tmp,block=16MiB"
//
//   auto cfg = outcore::Config::from_environment();   // defaults + OUTCORE_CONF
//   cfg.set("device_budget", "75%");                   // a CLI flag overrides
//   std::uint64_t budget = cfg.device_budget.resolve(info.total_memory_bytes,
//                                                    info.recommended_working_set_bytes);
//
// An unknown key or a bad value is a UsageError that lists the valid keys. Adding a
// key is one row in the table in config.cpp (name, help, parse-and-store).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "outcore/core/size.hpp"

namespace outcore {

struct Config {
    SizeSpec device_budget{};               ///< device tier budget; auto = recommended working set
    SizeSpec host_budget{};                 ///< host tier budget; auto = a fraction of RAM
    std::string spill_dir = "/var/tmp";     ///< where the swap store's spill file lives
    std::uint64_t block_bytes = 16 * kMiB;  ///< swap unit, 1 MiB .. 64 MiB
    std::string backend;                    ///< "", "cpu", "cuda", "vulkan" (OUTCORE_BACKEND wins)
    std::uint32_t cpu_devices = 1;          ///< devices the CPU backend presents

    /// Sets one key from text. Throws UsageError naming the key and, for an unknown
    /// key, listing the valid ones.
    void set(std::string_view key, std::string_view value);
    /// Applies "key=value,key=value". Empty text is fine. Throws UsageError.
    void apply(std::string_view assignments);
    /// Defaults, then OUTCORE_CONF if set. Throws UsageError naming OUTCORE_CONF.
    [[nodiscard]] static Config from_environment();

    struct KeyHelp {
        std::string_view name;
        std::string_view help;
    };
    /// Every key with a one-line description, in table order.
    [[nodiscard]] static std::vector<KeyHelp> keys();
};

}  // namespace outcore
