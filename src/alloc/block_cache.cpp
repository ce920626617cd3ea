#include "outcore/alloc/block_cache.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "alloc/block_key.hpp"

namespace outcore::alloc {

struct BlockCache::LiveMap {
    std::unordered_map<detail::BlockKey, Made, detail::BlockKeyHash> made;
};

BlockCache::BlockCache(Allocator& upstream, MemoryKind kind, std::uint64_t max_free_bytes)
    : upstream_(upstream), kind_(kind), max_free_bytes_(max_free_bytes), live_(std::make_unique<LiveMap>()) {}

BlockCache::~BlockCache() { clear(); }

template <class Pred>
void BlockCache::evict(Pred pred) noexcept {
    std::vector<RawBlock> dropped;
    {
        std::lock_guard lock(mutex_);
        for (auto it = free_.begin(); it != free_.end();) {
            if (!pred(*it)) {
                ++it;
                continue;
            }
            try {
                dropped.push_back(it->block);
            } catch (...) {
                break;  // no memory for the list: keep the rest cached
            }
            stats_.free_bytes -= it->block.bytes;
            --stats_.free_count;
            ++stats_.freed_blocks;
            it = free_.erase(it);
        }
    }
    for (const RawBlock& b : dropped) upstream_.deallocate_raw(b);
}

void BlockCache::clear() noexcept {
    evict([](const Entry&) { return true; });
}

BlockCacheStatistics BlockCache::statistics() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

RawBlock BlockCache::do_allocate(const AllocationRequest& request) {
    if (request.kind != kind_) return upstream_.allocate_raw(request);
    {
        std::lock_guard lock(mutex_);
        const auto fits = [&](const Entry& e) {
            return e.made.bytes == request.bytes &&
                   (request.alignment == 0 ? e.made.alignment == 0 : e.made.alignment >= request.alignment);
        };
        // Newest first: the block most recently given back is the likeliest match.
        const auto hit = std::find_if(free_.rbegin(), free_.rend(), fits);
        if (hit != free_.rend()) {
            const Entry e = *hit;
            live_->made.emplace(detail::BlockKey::of(e.block), e.made);  // may throw: nothing moved
            free_.erase(std::next(hit).base());
            stats_.free_bytes -= e.block.bytes;
            --stats_.free_count;
            ++stats_.hits;
            return e.block;
        }
        ++stats_.misses;
    }
    // A new size: what is cached would only add to the footprint.
    evict([](const Entry&) { return true; });
    const RawBlock raw = upstream_.allocate_raw(request);
    try {
        std::lock_guard lock(mutex_);
        live_->made.emplace(detail::BlockKey::of(raw),
                            Made{.bytes = request.bytes, .alignment = request.alignment});
    } catch (...) {
        upstream_.deallocate_raw(raw);
        throw;
    }
    return raw;
}

void BlockCache::do_deallocate(const RawBlock& block) noexcept {
    if (block.kind != kind_) {
        upstream_.deallocate_raw(block);
        return;
    }
    bool keep = false;
    {
        std::lock_guard lock(mutex_);
        const auto it = live_->made.find(detail::BlockKey::of(block));
        if (it != live_->made.end() && block.bytes <= max_free_bytes_) {
            try {
                free_.push_back(Entry{.block = block, .made = it->second});
                stats_.free_bytes += block.bytes;
                ++stats_.free_count;
                keep = true;
            } catch (...) {  // no memory to keep it: free it below
            }
        }
        if (it != live_->made.end()) live_->made.erase(it);
    }
    if (!keep) {
        upstream_.deallocate_raw(block);
        return;
    }
    // Oldest first, until the free blocks fit the limit again.
    std::uint64_t over = 0;
    {
        std::lock_guard lock(mutex_);
        over = stats_.free_bytes > max_free_bytes_ ? stats_.free_bytes - max_free_bytes_ : 0;
    }
    if (over == 0) return;
    std::uint64_t released = 0;
    evict([&](const Entry& e) {
        if (released >= over) return false;
        released += e.block.bytes;
        return true;
    });
}

}  // namespace outcore::alloc
