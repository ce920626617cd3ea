#include "vulkan_timing.hpp"

#include <time.h>

#include <cmath>
#include <utility>

#include "vulkan_check.hpp"

namespace outcore::vulkan {

namespace {

constexpr monitor::StampSource::Stamp kFixedBit = monitor::StampSource::Stamp{1} << 62;

std::int64_t monotonic_ns() noexcept {
    timespec t{};
    (void)clock_gettime(CLOCK_MONOTONIC, &t);
    return std::int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

}  // namespace

QueryStamps::QueryStamps(const Context& context, std::uint32_t valid_bits,
                         std::function<std::uint64_t()> finished)
    : context_(context),
      mask_(valid_bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << valid_bits) - 1),
      period_ns_(context.timestamp_period_ns()),
      finished_(std::move(finished)) {}

QueryStamps::~QueryStamps() {
    for (VkQueryPool p : pools_) vkDestroyQueryPool(context_.device(), p, nullptr);
}

monitor::StampSource::Stamp QueryStamps::acquire() {
    std::lock_guard lock(mutex_);
    if (free_.empty() && !released_.empty()) {
        // Queries whose command buffers have finished can be reset and used again.
        const std::uint64_t done = finished_();
        std::erase_if(released_, [&](Stamp s) {
            const Stamp q = s - 1;
            if (batch_[slot(q)] > done) return false;
            vkResetQueryPool(context_.device(), pools_[q >> 16], static_cast<std::uint32_t>(q & 0xFFFF), 1);
            free_.push_back(s);
            return true;
        });
    }
    if (free_.empty()) {
        const VkQueryPoolCreateInfo info{.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                         .pNext = nullptr,
                                         .flags = 0,
                                         .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                         .queryCount = kPoolQueries,
                                         .pipelineStatistics = 0};
        VkQueryPool pool = VK_NULL_HANDLE;
        OUTCORE_VK_CHECK(vkCreateQueryPool(context_.device(), &info, nullptr, &pool));
        try {
            pools_.push_back(pool);
            batch_.resize(pools_.size() * kPoolQueries, 0);
            free_.reserve(free_.size() + kPoolQueries);
            released_.reserve(pools_.size() * kPoolQueries);  // release() never allocates
        } catch (...) {
            if (!pools_.empty() && pools_.back() == pool) pools_.pop_back();
            vkDestroyQueryPool(context_.device(), pool, nullptr);
            throw;
        }
        vkResetQueryPool(context_.device(), pool, 0, kPoolQueries);
        const Stamp base = (pools_.size() - 1) << 16;
        for (std::uint32_t q = kPoolQueries; q-- > 0;) free_.push_back((base | q) + 1);
    }
    const Stamp s = free_.back();
    free_.pop_back();
    return s;
}

monitor::StampSource::Stamp QueryStamps::fixed(std::uint64_t ticks) {
    std::lock_guard lock(mutex_);
    if (!free_fixed_.empty()) {
        const Stamp s = free_fixed_.back();
        free_fixed_.pop_back();
        fixed_[s & ~kFixedBit] = ticks;
        return s;
    }
    fixed_.push_back(ticks);
    free_fixed_.reserve(fixed_.size());  // release() never allocates
    return kFixedBit | (fixed_.size() - 1);
}

void QueryStamps::write(VkCommandBuffer cmd, Stamp stamp, std::uint64_t batch) {
    const Stamp q = stamp - 1;
    VkQueryPool pool = VK_NULL_HANDLE;
    {
        std::lock_guard lock(mutex_);  // pools_ may grow on another thread
        pool = pools_[q >> 16];
        batch_[slot(q)] = batch;
    }
    vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, pool,
                        static_cast<std::uint32_t>(q & 0xFFFF));
}

bool QueryStamps::ticks_locked(Stamp stamp, std::uint64_t& ticks) noexcept {
    if ((stamp & kFixedBit) != 0) {
        ticks = fixed_[stamp & ~kFixedBit];
        return true;
    }
    const Stamp q = stamp - 1;
    std::uint64_t value = 0;
    const VkResult rc =
        vkGetQueryPoolResults(context_.device(), pools_[q >> 16], static_cast<std::uint32_t>(q & 0xFFFF), 1,
                              sizeof(value), &value, sizeof(value), VK_QUERY_RESULT_64_BIT);
    if (rc != VK_SUCCESS) return false;  // VK_NOT_READY: not written yet
    ticks = value & mask_;
    return true;
}

bool QueryStamps::done(Stamp stamp) noexcept {
    std::lock_guard lock(mutex_);
    std::uint64_t ticks = 0;
    return ticks_locked(stamp, ticks);
}

bool QueryStamps::elapsed_ms(Stamp from, Stamp to, double& ms) noexcept {
    std::lock_guard lock(mutex_);
    std::uint64_t a = 0, b = 0;
    if (!ticks_locked(from, a) || !ticks_locked(to, b)) return false;
    // The counter wraps within its valid bits: the shorter way round is the interval.
    std::uint64_t diff = (b - a) & mask_;
    double sign = 1.0;
    if (diff > mask_ / 2) {
        diff = (a - b) & mask_;
        sign = -1.0;
    }
    ms = sign * static_cast<double>(diff) * period_ns_ * 1e-6;
    return true;
}

void QueryStamps::release(Stamp stamp) noexcept {
    std::lock_guard lock(mutex_);
    if ((stamp & kFixedBit) != 0) {
        if (free_fixed_.size() < free_fixed_.capacity()) free_fixed_.push_back(stamp);
        return;  // else the slot is not reused
    }
    released_.push_back(stamp);  // capacity reserved for every query
}

monitor::ClockAnchor QueryStamps::anchor_of(const Calibration& c) noexcept {
    // The steady clock and CLOCK_MONOTONIC share an epoch on Linux's libstdc++; the
    // offset is measured anyway (a read of each, the monotonic one bracketing).
    const std::int64_t m0 = monotonic_ns();
    const std::int64_t steady = monitor::now_ns();
    const std::int64_t m1 = monotonic_ns();
    const std::int64_t offset = steady - (m0 + (m1 - m0) / 2);
    const std::int64_t at = c.monotonic_ns + offset;
    const auto dev = static_cast<std::int64_t>(c.deviation_ns) + (m1 - m0) / 2;
    return {.before_ns = at - dev, .after_ns = at + dev};
}

}  // namespace outcore::vulkan
