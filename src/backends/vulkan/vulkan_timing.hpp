// vulkan_timing.hpp — device timestamps of one Vulkan queue for device-timed traces
// (private to the backend; docs/tracing.md).
//
// A QueryStamps hands out timestamp queries (pools of kPoolQueries, grown as needed)
// as monitor::StampSource stamps, and anchor stamps: counter values read together
// with the host clock (Context::calibrate), which need no query. A VulkanQueue writes
// a query before and after each command it times and gives both to its DeviceOpLog:
//
//   QueryStamps stamps(context, queue.timestamp_bits);
//   const Calibration c = context.calibrate();
//   log.set_anchor(stamps.fixed(c.ticks), anchor_of(c));
//   Stamp begin = stamps.acquire(), end = stamps.acquire();
//   stamps.write(cmd, begin, batch); ...command...; stamps.write(cmd, end, batch);
//
// Queries are reset from the host (hostQueryReset: transfer-only queues cannot record
// vkCmdResetQueryPool) when a pool is made, and a released query again once the batch
// that wrote it has finished (the queue's timeline says so) — an op is released when
// its stamps are done, which can be before the rest of its command buffer is. A
// stamp is always reset before a command buffer writes it. Thread-safe.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "outcore/monitor/device_time.hpp"
#include "vulkan_context.hpp"

namespace outcore::vulkan {

class QueryStamps final : public monitor::StampSource {
public:
    /// `valid_bits`: the queue family's timestampValidBits (1–64); `finished()`: the
    /// last batch value (the queue's timeline) whose commands have all run.
    QueryStamps(const Context& context, std::uint32_t valid_bits, std::function<std::uint64_t()> finished);
    ~QueryStamps() override;
    QueryStamps(const QueryStamps&) = delete;
    QueryStamps& operator=(const QueryStamps&) = delete;

    /// A reset query, for write(). Throws BackendError (no memory for another pool).
    [[nodiscard]] Stamp acquire();
    /// A stamp already passed at counter value `ticks` (an anchor).
    [[nodiscard]] Stamp fixed(std::uint64_t ticks);
    /// Records the query's timestamp once everything before it in `cmd` has finished;
    /// `batch` is the timeline value the command buffer's submit will signal.
    void write(VkCommandBuffer cmd, Stamp stamp, std::uint64_t batch);

    bool done(Stamp stamp) noexcept override;
    bool elapsed_ms(Stamp from, Stamp to, double& ms) noexcept override;
    void release(Stamp stamp) noexcept override;

    /// The steady-clock window a calibration places its counter value in.
    [[nodiscard]] static monitor::ClockAnchor anchor_of(const Calibration& c) noexcept;

private:
    // A query stamp is ((pool << 16) | query) + 1; an anchor stamp has bit 62 set.
    static constexpr std::uint32_t kPoolQueries = 1024;
    /// Index of query stamp − 1 in batch_.
    static std::size_t slot(Stamp q) noexcept { return (q >> 16) * kPoolQueries + (q & 0xFFFF); }
    /// Counter value of a done stamp; false when not done (or on error).
    bool ticks_locked(Stamp stamp, std::uint64_t& ticks) noexcept;

    const Context& context_;
    std::uint64_t mask_;
    double period_ns_;
    std::function<std::uint64_t()> finished_;
    std::mutex mutex_;
    std::vector<VkQueryPool> pools_;
    std::vector<std::uint64_t> batch_;  ///< per query: the batch that last wrote it (0: none)
    std::vector<Stamp> free_;           ///< reset queries
    std::vector<Stamp> released_;       ///< to reset once their batch has finished
    std::vector<std::uint64_t> fixed_;
    std::vector<Stamp> free_fixed_;
};

}  // namespace outcore::vulkan
