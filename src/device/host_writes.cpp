// host_writes.cpp — PendingHostWrites (host_writes.hpp).
#include "device/host_writes.hpp"

namespace outcore::detail {

PendingHostWrites::PendingHostWrites() : state_(std::make_shared<State>()) {}

PendingHostWrites::Token::~Token() {
    std::lock_guard lock(state->mutex);
    state->ranges.erase(id);
}

std::shared_ptr<void> PendingHostWrites::note(const void* host, std::uint64_t bytes) {
    const auto first = reinterpret_cast<std::uintptr_t>(host);
    std::uint64_t id = 0;
    {
        std::lock_guard lock(state_->mutex);
        id = state_->next++;
        state_->ranges.emplace(id, std::pair{first, first + bytes});
    }
    return std::make_shared<Token>(state_, id);
}

bool PendingHostWrites::overlaps(const void* host, std::uint64_t bytes) const {
    if (bytes == 0) return false;
    const auto first = reinterpret_cast<std::uintptr_t>(host);
    const std::uintptr_t last = first + bytes;
    std::lock_guard lock(state_->mutex);
    for (const auto& [id, range] : state_->ranges) {
        if (range.first < last && first < range.second) return true;
    }
    return false;
}

std::size_t PendingHostWrites::pending() const {
    std::lock_guard lock(state_->mutex);
    return state_->ranges.size();
}

}  // namespace outcore::detail
