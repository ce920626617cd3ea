#include "outcore/tile/queue_cache.hpp"

#include <algorithm>

#include "outcore/device/device.hpp"

namespace outcore::tile {

std::vector<std::unique_ptr<Queue>> QueueCache::take(QueueRole role, std::size_t count) {
    {
        std::lock_guard lock(mutex_);
        const auto it = idle_.find({role, count});
        if (it != idle_.end() && !it->second.empty()) {
            Set set = std::move(it->second.front());
            it->second.pop_front();
            return set;
        }
    }
    Set set;
    for (std::size_t i = 0; i < count; ++i) set.push_back(device_.create_queue(role));  // in a row
    std::lock_guard lock(mutex_);
    created_ += count;
    return set;
}

std::unique_ptr<Queue> QueueCache::take(QueueRole role) { return std::move(take(role, 1).front()); }

void QueueCache::give_back(std::vector<std::unique_ptr<Queue>> set) noexcept {
    if (set.empty()) return;
    const QueueRole role = set.front() ? set.front()->role() : QueueRole::General;
    const bool keep = std::all_of(set.begin(), set.end(), [&](const std::unique_ptr<Queue>& q) {
        return q && &q->device() == &device_ && q->role() == role;
    });
    if (!keep) return;  // destroyed here, outside the lock
    try {
        std::lock_guard lock(mutex_);
        const std::size_t size = set.size();
        idle_[{role, size}].push_back(std::move(set));
    } catch (...) {
        // No memory to keep it: the set is destroyed on return instead.
    }
}

void QueueCache::give_back(std::unique_ptr<Queue> queue) noexcept {
    try {
        Set set;
        set.push_back(std::move(queue));
        give_back(std::move(set));
    } catch (...) {
        // As above.
    }
}

std::uint64_t QueueCache::created() const {
    std::lock_guard lock(mutex_);
    return created_;
}

std::size_t QueueCache::idle() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& [key, sets] : idle_) n += key.second * sets.size();
    return n;
}

void QueueCache::clear() noexcept {
    std::map<std::pair<QueueRole, std::size_t>, std::deque<Set>> gone;
    {
        std::lock_guard lock(mutex_);
        gone.swap(idle_);
    }
}  // destroyed outside the lock

}  // namespace outcore::tile
