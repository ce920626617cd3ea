// BufferPool: equal slots from large chunks; see include/outcore/alloc/buffer_pool.hpp.
#include "outcore/alloc/buffer_pool.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"

namespace outcore::alloc {

PooledBuffer::PooledBuffer(PooledBuffer&& other) noexcept
    : pool_(other.pool_), raw_(other.raw_), slot_(other.slot_) {
    other.pool_ = nullptr;
    other.raw_ = {};
}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        pool_ = other.pool_;
        raw_ = other.raw_;
        slot_ = other.slot_;
        other.pool_ = nullptr;
        other.raw_ = {};
    }
    return *this;
}

void PooledBuffer::reset() noexcept {
    if (pool_ != nullptr) {
        pool_->release(slot_);
        pool_ = nullptr;
        raw_ = {};
    }
}

BufferPool::BufferPool(Allocator& upstream, std::uint64_t alignment_bytes, const BufferPoolOptions& options)
    : upstream_(upstream), options_(options), alignment_bytes_(alignment_bytes) {
    if (!is_power_of_two(alignment_bytes)) {
        throw UsageError("buffer_pool",
                         fmt::format("alignment must be a power of two (got {})", alignment_bytes));
    }
    if (options.slot_bytes == 0) throw UsageError("buffer_pool", "slot_bytes must be > 0");
    if (options.slots_per_chunk == 0) throw UsageError("buffer_pool", "slots_per_chunk must be > 0");
    if (options.max_slots == 0) throw UsageError("buffer_pool", "max_slots must be > 0");
    if (options.initial_slots > options.max_slots) {
        throw UsageError("buffer_pool", fmt::format("initial_slots {} exceeds max_slots {}",
                                                    options.initial_slots, options.max_slots));
    }
    stride_bytes_ = checked_align_up(options.slot_bytes, alignment_bytes, "buffer_pool slot_bytes");
    // The largest chunk must be expressible; checking once here keeps growth simple.
    (void)checked_mul(stride_bytes_, std::min(options.slots_per_chunk, options.max_slots),
                      "buffer_pool chunk");
    if (options.initial_slots != 0) {
        // The destructor does not run for a throwing constructor: give back what was made.
        try {
            reserve(options.initial_slots);
        } catch (...) {
            for (const RawBlock& chunk : chunks_) upstream_.deallocate_raw(chunk);
            throw;
        }
    }
}

BufferPool::BufferPool(Device& device, const BufferPoolOptions& options)
    : BufferPool(static_cast<Allocator&>(device), device.info().min_offset_alignment, options) {}

BufferPool::~BufferPool() {
    if (slots_in_use_ != 0) {
        log::warn("buffer_pool",
                  "destroyed with {} of {} slots still held; their memory is released with the pool",
                  slots_in_use_, slots_total_);
    }
    for (const RawBlock& chunk : chunks_) upstream_.deallocate_raw(chunk);
}

PooledBuffer BufferPool::acquire() {
    const std::lock_guard lock(mutex_);
    if (free_slots_.empty()) {
        if (slots_total_ >= options_.max_slots) {
            OutOfMemoryInfo info;
            info.requested_bytes = options_.slot_bytes;
            info.tier = tier_of(options_.kind);
            info.budget_bytes = options_.max_slots * stride_bytes_;
            info.in_use_bytes = slots_in_use_ * stride_bytes_;
            info.largest_free_bytes = 0;
            throw OutOfMemory("buffer_pool",
                              fmt::format("all {} slots in use (max_slots)", options_.max_slots), info);
        }
        grow_locked();
    }
    return take_locked();
}

std::optional<PooledBuffer> BufferPool::try_acquire() {
    const std::lock_guard lock(mutex_);
    if (free_slots_.empty()) {
        if (slots_total_ >= options_.max_slots) return std::nullopt;
        try {
            grow_locked();
        } catch (const OutOfMemory&) {
            return std::nullopt;
        }
    }
    return take_locked();
}

void BufferPool::reserve(std::uint64_t slot_count) {
    if (slot_count > options_.max_slots) {
        throw UsageError("buffer_pool", fmt::format("cannot reserve {} slots: max_slots is {}", slot_count,
                                                    options_.max_slots));
    }
    const std::lock_guard lock(mutex_);
    while (slots_total_ < slot_count) grow_locked();
}

BufferPoolStatistics BufferPool::statistics() const {
    const std::lock_guard lock(mutex_);
    return {slots_total_, slots_in_use_, slots_peak_, chunks_.size(), bytes_reserved_};
}

void BufferPool::grow_locked() {
    const std::uint64_t count = std::min(options_.slots_per_chunk, options_.max_slots - slots_total_);
    const std::uint64_t chunk_bytes = count * stride_bytes_;  // checked in the constructor
    // Reserve bookkeeping first: after the upstream allocation nothing may throw,
    // and release() must be able to push without reallocating.
    chunks_.reserve(chunks_.size() + 1);
    free_slots_.reserve(slots_total_ + count);
    const RawBlock chunk = upstream_.allocate_raw(
        {.bytes = chunk_bytes, .kind = options_.kind, .alignment = alignment_bytes_, .tag = options_.tag});
    chunks_.push_back(chunk);
    // Push in reverse so the lowest new slot is handed out first.
    for (std::uint64_t i = count; i-- > 0;) free_slots_.push_back(slots_total_ + i);
    slots_total_ += count;
    bytes_reserved_ += chunk_bytes;
}

PooledBuffer BufferPool::take_locked() {
    const std::uint64_t slot = free_slots_.back();
    free_slots_.pop_back();
    ++slots_in_use_;
    slots_peak_ = std::max(slots_peak_, slots_in_use_);
    return PooledBuffer(*this, slot_block(slot), slot);
}

RawBlock BufferPool::slot_block(std::uint64_t slot) const noexcept {
    // Only the last chunk can be short (cut by max_slots), so this division holds.
    const RawBlock& chunk = chunks_[slot / options_.slots_per_chunk];
    const std::uint64_t offset = (slot % options_.slots_per_chunk) * stride_bytes_;
    RawBlock b = chunk;
    b.bytes = options_.slot_bytes;
    b.offset = chunk.offset + offset;
    b.host = chunk.host != nullptr ? chunk.host + offset : nullptr;
    b.cookie = slot;
    return b;
}

void BufferPool::release(std::uint64_t slot) noexcept {
    const std::lock_guard lock(mutex_);
    free_slots_.push_back(slot);  // capacity reserved for every slot: cannot throw
    --slots_in_use_;
}

}  // namespace outcore::alloc
