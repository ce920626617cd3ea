#include "outcore/tile/queue_cache.hpp"

#include <utility>

#include "outcore/device/device.hpp"

namespace outcore::tile {

std::unique_ptr<Queue> QueueCache::take(QueueRole role) {
    {
        std::lock_guard lock(mutex_);
        auto& idle = idle_[static_cast<std::size_t>(role)];
        if (!idle.empty()) {
            std::unique_ptr<Queue> q = std::move(idle.front());
            idle.pop_front();
            return q;
        }
    }
    std::unique_ptr<Queue> q = device_.create_queue(role);
    std::lock_guard lock(mutex_);
    ++created_;
    return q;
}

void QueueCache::give_back(std::unique_ptr<Queue> queue) noexcept {
    if (!queue || &queue->device() != &device_) return;  // another device's: destroyed here
    std::lock_guard lock(mutex_);
    idle_[static_cast<std::size_t>(queue->role())].push_back(std::move(queue));
}

std::uint64_t QueueCache::created() const {
    std::lock_guard lock(mutex_);
    return created_;
}

std::size_t QueueCache::idle() const {
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (const auto& q : idle_) n += q.size();
    return n;
}

void QueueCache::clear() noexcept {
    std::array<std::deque<std::unique_ptr<Queue>>, kRoles> gone;
    {
        std::lock_guard lock(mutex_);
        gone.swap(idle_);
    }
}  // destroyed outside the lock

}  // namespace outcore::tile
