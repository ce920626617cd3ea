#include "outcore/core/config.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <functional>

#include "outcore/core/error.hpp"

namespace outcore {

namespace {

struct KeyDef {
    std::string_view name;
    std::string_view help;
    std::function<void(Config&, std::string_view)> set;
};

std::uint32_t parse_count(std::string_view key, std::string_view value, std::uint32_t lo, std::uint32_t hi) {
    std::uint32_t v = 0;
    const auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || p != value.data() + value.size() || v < lo || v > hi) {
        throw UsageError("config", fmt::format("invalid value '{}' for {}: expected an integer {}..{}", value,
                                               key, lo, hi));
    }
    return v;
}

// The one table of keys: adding a setting is adding a row.
const std::vector<KeyDef>& key_table() {
    static const std::vector<KeyDef> table{
        {"device_budget",
         "device memory budget: bytes, % of the device, or auto (the recommended working set)",
         [](Config& c, std::string_view v) { c.device_budget = parse_size(v, "device_budget"); }},
        {"host_budget", "host memory budget for the swap store's warm tier: bytes, % of RAM, or auto",
         [](Config& c, std::string_view v) { c.host_budget = parse_size(v, "host_budget"); }},
        {"spill_dir", "directory for the swap store's spill file (unnamed, removed at exit)",
         [](Config& c, std::string_view v) {
             if (v.empty()) throw UsageError("config", "spill_dir must not be empty");
             c.spill_dir = std::string(v);
         }},
        {"block", "swap unit size, 1MiB..64MiB",
         [](Config& c, std::string_view v) {
             const std::uint64_t b = parse_bytes(v, "block");
             if (b < kMiB || b > 64 * kMiB) {
                 throw UsageError("config",
                                  fmt::format("invalid value '{}' for block: must be 1MiB..64MiB", v));
             }
             c.block_bytes = b;
         }},
        {"backend",
         "device backend: cpu, cuda or vulkan, optionally with :index (default: first GPU, else cpu)",
         [](Config& c, std::string_view v) { c.backend = std::string(v); }},
        {"cpu_devices", "number of devices the CPU backend presents, 1..64",
         [](Config& c, std::string_view v) { c.cpu_devices = parse_count("cpu_devices", v, 1, 64); }},
    };
    return table;
}

std::string valid_keys() {
    std::string out;
    for (const KeyDef& k : key_table()) {
        if (!out.empty()) out += ", ";
        out += k.name;
    }
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

}  // namespace

void Config::set(std::string_view key, std::string_view value) {
    for (const KeyDef& k : key_table()) {
        if (k.name == key) {
            k.set(*this, trim(value));
            return;
        }
    }
    throw UsageError("config", fmt::format("unknown key '{}' (valid keys: {})", key, valid_keys()));
}

void Config::apply(std::string_view assignments) {
    while (!assignments.empty()) {
        const std::size_t comma = assignments.find(',');
        const std::string_view item = trim(assignments.substr(0, comma));
        assignments = comma == std::string_view::npos ? std::string_view{} : assignments.substr(comma + 1);
        if (item.empty()) continue;
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
            throw UsageError("config",
                             fmt::format("'{}' is not key=value (valid keys: {})", item, valid_keys()));
        }
        set(trim(item.substr(0, eq)), item.substr(eq + 1));
    }
}

Config Config::from_environment() {
    Config config;
    if (const char* env = std::getenv("OUTCORE_CONF"); env != nullptr) {
        try {
            config.apply(env);
        } catch (const UsageError& e) {
            throw UsageError("OUTCORE_CONF", std::string(e.detail()));
        }
    }
    return config;
}

std::vector<Config::KeyHelp> Config::keys() {
    std::vector<KeyHelp> out;
    for (const KeyDef& k : key_table()) out.push_back({k.name, k.help});
    return out;
}

}  // namespace outcore
