// The host tier's memory: pinned unit-sized slots, else pageable memory.
#include <fmt/format.h>

#include <new>
#include <utility>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/swap/spill_file.hpp"
#include "store_units.hpp"

namespace outcore::swap::detail {

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        pool_ = std::exchange(other.pool_, nullptr);
        slot_ = std::exchange(other.slot_, 0);
        pageable_ = std::move(other.pageable_);
        keeper_ = std::exchange(other.keeper_, nullptr);
        pageable_bytes_ = std::exchange(other.pageable_bytes_, 0);
    }
    return *this;
}

void HostBuffer::reset() noexcept {
    if (pool_ != nullptr) pool_->give(slot_);
    if (pageable_ && keeper_ != nullptr) keeper_->keep_pageable(std::move(pageable_), pageable_bytes_);
    pageable_.reset();
    data_ = nullptr;
    pool_ = nullptr;
    slot_ = 0;
    keeper_ = nullptr;
    pageable_bytes_ = 0;
}

void AlignedDelete::operator()(std::byte* p) const noexcept {
    ::operator delete[](p, std::align_val_t{kSpillAlignment});
}

HostBuffer HostBuffer::allocate(PinnedPool& pool, std::uint64_t bytes) {
    HostBuffer b;
    if (std::optional<PinnedPool::Taken> taken = pool.take(bytes)) {
        b.data_ = taken->data;
        b.pool_ = &pool;
        b.slot_ = taken->slot;
        return b;
    }
    // Pageable memory: the warm tier beyond the pinned pool. Copies from it to a GPU
    // are slower (the driver stages them) but the budget, not pinning, bounds the tier.
    // Aligned for O_DIRECT: the spill file reads and writes it without a bounce copy.
    b.pageable_ = pool.take_pageable(bytes);
    if (!b.pageable_) {
        b.pageable_.reset(bytes <= SIZE_MAX ? static_cast<std::byte*>(::operator new[](
                                                  static_cast<std::size_t>(bytes),
                                                  std::align_val_t{kSpillAlignment}, std::nothrow))
                                            : nullptr);
    }
    if (!b.pageable_) {
        throw OutOfMemory("swap", "pageable host memory refused",
                          OutOfMemoryInfo{.requested_bytes = bytes, .tier = Tier::Host});
    }
    b.data_ = b.pageable_.get();
    b.keeper_ = &pool;
    b.pageable_bytes_ = bytes;
    return b;
}

PinnedPool::PinnedPool(Device& device, std::uint64_t slot_bytes, std::uint32_t max_slots)
    : device_(device), slot_bytes_(slot_bytes), max_slots_(max_slots) {
    slots_.reserve(max_slots);
    free_.reserve(max_slots);
    kept_.reserve(kKeptPageable);
}

std::optional<PinnedPool::Taken> PinnedPool::take(std::uint64_t bytes) noexcept {
    if (bytes > slot_bytes_ || bytes < slot_bytes_ / 2) return std::nullopt;
    std::unique_lock lock(mutex_);
    if (!free_.empty()) {
        const std::uint32_t s = free_.back();
        free_.pop_back();
        return Taken{s, slots_[s].host()};
    }
    if (slots_.size() + growing_ >= max_slots_) return std::nullopt;
    ++growing_;
    lock.unlock();
    // Pinned allocation is slow (cudaMallocHost pins pages): never under the lock.
    Block block;
    try {
        block = device_.allocate({.bytes = slot_bytes_,
                                  .kind = MemoryKind::HostPinned,
                                  .alignment = kSpillAlignment,
                                  .tag = "swap.pinned"});
    } catch (const std::exception& e) {
        lock.lock();
        --growing_;
        // The device is out of pinned memory: stop asking; pageable memory takes over.
        max_slots_ = static_cast<std::uint32_t>(slots_.size()) + growing_;
        log::debug("swap", "pinned pool stops at {} slots: {}", max_slots_, e.what());
        return std::nullopt;
    }
    lock.lock();
    --growing_;
    slots_.push_back(std::move(block));
    const auto s = static_cast<std::uint32_t>(slots_.size() - 1);
    return Taken{s, slots_[s].host()};
}

void PinnedPool::give(std::uint32_t slot) noexcept {
    std::lock_guard lock(mutex_);
    free_.push_back(slot);
}

std::uint32_t PinnedPool::slot_count() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::uint32_t>(slots_.size());
}

std::uint32_t PinnedPool::free_count() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::uint32_t>(free_.size());
}

PageableBytes PinnedPool::take_pageable(std::uint64_t bytes) noexcept {
    if (bytes != slot_bytes_) return {};
    std::lock_guard lock(mutex_);
    if (kept_.empty()) return {};
    PageableBytes b = std::move(kept_.back());
    kept_.pop_back();
    return b;
}

void PinnedPool::keep_pageable(PageableBytes buffer, std::uint64_t bytes) noexcept {
    if (bytes != slot_bytes_) return;  // freed here
    std::lock_guard lock(mutex_);
    if (kept_.size() < kKeptPageable) kept_.push_back(std::move(buffer));
}  // a buffer not kept is freed on return, after the lock is released

std::uint32_t PinnedPool::kept_pageable_count() const {
    std::lock_guard lock(mutex_);
    return static_cast<std::uint32_t>(kept_.size());
}

}  // namespace outcore::swap::detail
