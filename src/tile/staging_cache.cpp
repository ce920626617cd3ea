#include "outcore/tile/staging_cache.hpp"

#include <algorithm>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/device/device.hpp"

namespace outcore::tile {

namespace {
constexpr std::uint64_t kPageBytes = 4096;
}

StagingCache::StagingCache(Device& device, std::uint64_t max_free_bytes)
    : device_(device), max_free_bytes_(max_free_bytes) {}

std::vector<Block> StagingCache::take(std::uint64_t bytes, std::uint32_t count) {
    if (bytes == 0) throw UsageError("staging", "cannot take 0-byte staging buffers");
    std::vector<Block> out;
    out.reserve(count);
    try {
        {
            std::lock_guard lock(mutex_);
            while (out.size() < count) {
                // Best fit within [bytes, 2·bytes]: reuse without hoarding huge blocks
                // for small rings.
                auto best = free_.end();
                for (auto it = free_.begin(); it != free_.end(); ++it) {
                    if (it->bytes() >= bytes && it->bytes() <= 2 * bytes &&
                        (best == free_.end() || it->bytes() < best->bytes())) {
                        best = it;
                    }
                }
                if (best == free_.end()) break;
                free_bytes_ -= best->bytes();
                out.push_back(std::move(*best));
                free_.erase(best);
            }
        }
        while (out.size() < count) {
            out.push_back(device_.allocate({.bytes = bytes,
                                            .kind = MemoryKind::HostPinned,
                                            .alignment = kPageBytes,
                                            .tag = "staging.cache"}));
            std::lock_guard lock(mutex_);
            ++allocations_;
        }
    } catch (...) {
        give_back(out);
        throw;
    }
    return out;
}

void StagingCache::give_back(std::vector<Block>& blocks) noexcept {
    {
        std::lock_guard lock(mutex_);
        for (Block& b : blocks) {
            if (!b) continue;
            try {
                free_bytes_ += b.bytes();
                free_.push_back(std::move(b));
            } catch (...) {
                free_bytes_ -= b.bytes();
                b.reset();  // could not keep it: free it
            }
        }
        while (free_bytes_ > max_free_bytes_ && !free_.empty()) {
            free_bytes_ -= free_.front().bytes();
            free_.pop_front();  // frees the oldest block
        }
    }
    blocks.clear();
}

std::uint64_t StagingCache::free_bytes() const {
    std::lock_guard lock(mutex_);
    return free_bytes_;
}

std::uint64_t StagingCache::allocation_count() const {
    std::lock_guard lock(mutex_);
    return allocations_;
}

void StagingCache::clear() noexcept {
    std::deque<Block> dropped;
    {
        std::lock_guard lock(mutex_);
        dropped.swap(free_);
        free_bytes_ = 0;
    }
}

}  // namespace outcore::tile
