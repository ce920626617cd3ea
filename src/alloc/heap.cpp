// Heap: TLSF sub-allocation over native blocks; see include/outcore/alloc/heap.hpp.
#include "outcore/alloc/heap.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/device.hpp"

namespace outcore::alloc {

namespace {

constexpr std::uint64_t kSlotMask = 0xFFFF'FFFFULL;

// A cookie names a slot and the generation of the block in it, so a block freed
// after its native block was trimmed and the slot reused is caught, not misapplied.
[[nodiscard]] std::uint64_t make_cookie(std::uint32_t slot, std::uint32_t generation) noexcept {
    return (std::uint64_t{generation} << 32) | slot;
}

}  // namespace

Heap::Heap(Allocator& upstream, std::uint64_t alignment_bytes, const HeapOptions& options)
    : upstream_(upstream),
      options_(options),
      alignment_bytes_(alignment_bytes),
      max_block_bytes_(UINT64_MAX) {
    if (!is_power_of_two(alignment_bytes)) {
        throw UsageError("heap", fmt::format("alignment must be a power of two (got {})", alignment_bytes));
    }
    if (options.block_bytes == 0 || options.block_bytes > Tlsf::kMaxCapacityBytes) {
        throw UsageError("heap",
                         fmt::format("block_bytes must be 1 B .. 2^63 B (got {})", options.block_bytes));
    }
    options_.block_bytes = align_up(options.block_bytes, alignment_bytes);
}

Heap::Heap(Device& device, const HeapOptions& options)
    : Heap(static_cast<Allocator&>(device), device.info().min_offset_alignment, options) {
    max_block_bytes_ = device.info().max_allocation_bytes;
}

Heap::~Heap() {
    std::uint64_t live = 0;
    for (const Slot& s : slots_) {
        if (s.tlsf) live += s.tlsf->allocation_count();
    }
    if (live != 0) {
        log::warn("heap",
                  "destroyed with {} live allocations ({} in use); their memory is released with the heap",
                  live, format_size(bytes_used_locked()));
    }
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].tlsf) release_slot_locked(i);
    }
}

RawBlock Heap::do_allocate(const AllocationRequest& request) {
    if (request.kind != options_.kind) {
        throw UsageError("heap", fmt::format("a {} heap was asked for {} memory", to_string(options_.kind),
                                             to_string(request.kind)));
    }
    const std::uint64_t alignment = std::max(request.alignment, alignment_bytes_);
    const std::lock_guard lock(mutex_);
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        // Dedicated blocks serve only their own request, so they empty (and go back)
        // when it is freed. Alignment counts from the native allocation's start.
        if (!s.tlsf || s.dedicated || (s.native.offset & (alignment - 1)) != 0) continue;
        if (const std::optional<Placement> p = s.tlsf->find(request.bytes, alignment)) {
            return place_locked(i, s.tlsf->commit(*p), request);
        }
    }
    const std::uint32_t index = grow_locked(request.bytes, alignment, /*for_reserve=*/false);
    const std::optional<Allocation> a = slots_[index].tlsf->allocate(request.bytes, alignment);
    if (!a) {
        release_slot_locked(index);
        throw InternalError("heap", "a new block could not place the request it was made for");
    }
    return place_locked(index, *a, request);
}

void Heap::do_deallocate(const RawBlock& block) noexcept {
    const std::lock_guard lock(mutex_);
    const auto index = static_cast<std::uint32_t>(block.cookie & kSlotMask);
    const auto generation = static_cast<std::uint32_t>(block.cookie >> 32);
    if (index >= slots_.size() || !slots_[index].tlsf || slots_[index].generation != generation ||
        slots_[index].native.native != block.native || block.offset < slots_[index].native.offset) {
        ++invalid_free_count_;
        log::error("heap", "deallocate of a block this heap did not make (cookie {:#x}, offset {}); ignored",
                   block.cookie, block.offset);
        return;
    }
    Slot& s = slots_[index];
    try {
        s.tlsf->free(block.offset - s.native.offset);
    } catch (const Error& e) {
        // A double free: the Tlsf is unchanged, so report and carry on.
        ++invalid_free_count_;
        log::error("heap", "deallocate failed: {}", e.what());
        return;
    }
    if (s.dedicated && s.tlsf->allocation_count() == 0) release_slot_locked(index);
}

void Heap::reserve(std::uint64_t bytes) {
    if (bytes == 0) throw UsageError("heap", "cannot reserve 0 bytes");
    const std::lock_guard lock(mutex_);
    (void)grow_locked(bytes, alignment_bytes_, /*for_reserve=*/true);
}

std::uint64_t Heap::trim() noexcept {
    const std::lock_guard lock(mutex_);
    std::uint64_t released = 0;
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].tlsf && slots_[i].tlsf->allocation_count() == 0) {
            released += slots_[i].tlsf->capacity_bytes();
            release_slot_locked(i);
        }
    }
    return released;
}

std::uint32_t Heap::grow_locked(std::uint64_t bytes, std::uint64_t alignment, bool for_reserve) {
    if (!for_reserve && options_.never_grow) {
        throw_out_of_memory_locked(bytes, "no block has room and never_grow is set");
    }
    if (bytes > Tlsf::kMaxCapacityBytes) throw_out_of_memory_locked(bytes, "larger than any block can be");
    const std::uint64_t needed = align_up(bytes, alignment_bytes_);
    const bool dedicated = !for_reserve && needed > options_.block_bytes;
    std::uint64_t block_bytes = (for_reserve || dedicated) ? needed : options_.block_bytes;

    if (block_bytes > max_block_bytes_) {
        if (needed > max_block_bytes_) {
            throw_out_of_memory_locked(bytes, fmt::format("larger than the device's largest allocation ({})",
                                                          format_size(max_block_bytes_)));
        }
        block_bytes = std::max(needed, max_block_bytes_ & ~(alignment_bytes_ - 1));
    }
    const std::uint64_t headroom =
        options_.limit_bytes > bytes_reserved_ ? options_.limit_bytes - bytes_reserved_ : 0;
    if (block_bytes > headroom) {
        if (needed <= headroom) {
            // A smaller block still fits under the limit: take that rather than overshoot.
            block_bytes = std::max(needed, headroom & ~(alignment_bytes_ - 1));
        } else if (options_.within_budget) {
            throw_out_of_memory_locked(
                bytes, fmt::format("growing by {} would pass the heap limit", format_size(needed)));
        } else {
            block_bytes = needed;
            if (!warned_over_limit_) {
                warned_over_limit_ = true;
                log::warn("heap", "growing past its limit of {} (advisory: within_budget is off)",
                          format_size(options_.limit_bytes));
            }
        }
    }

    // Everything that can throw before the native allocation, so nothing leaks after it.
    if (vacant_.empty()) {
        slots_.reserve(slots_.size() + 1);
        vacant_.reserve(slots_.size() + 1);
    }
    auto tlsf = std::make_unique<Tlsf>(block_bytes, alignment_bytes_);
    const std::uint64_t native_alignment = std::max(alignment, alignment_bytes_);
    RawBlock native;
    try {
        native = upstream_.allocate_raw({.bytes = block_bytes,
                                         .kind = options_.kind,
                                         .alignment = native_alignment,
                                         .tag = options_.tag});
    } catch (const OutOfMemory& e) {
        // Re-thrown with the heap's view added: what was asked of the heap, what it
        // holds, and the largest range it could still place.
        OutOfMemoryInfo info = e.info();
        info.requested_bytes = bytes;
        info.tier = tier_of(options_.kind);
        if (options_.limit_bytes != UINT64_MAX) info.budget_bytes = options_.limit_bytes;
        info.in_use_bytes = bytes_used_locked();
        info.largest_free_bytes = largest_free_locked();
        throw OutOfMemory("heap",
                          fmt::format("growing by a {} block failed (heap holds {}): {}",
                                      format_size(block_bytes), format_size(bytes_reserved_), e.what()),
                          info);
    }
    if ((native.offset & (native_alignment - 1)) != 0) {
        upstream_.deallocate_raw(native);
        throw InternalError("heap", fmt::format("upstream returned a block at offset {}, not aligned to {}",
                                                native.offset, native_alignment));
    }

    std::uint32_t index = 0;
    if (vacant_.empty()) {
        slots_.emplace_back();  // capacity reserved above: cannot throw
        index = static_cast<std::uint32_t>(slots_.size() - 1);
    } else {
        index = vacant_.back();
        vacant_.pop_back();
    }
    Slot& s = slots_[index];
    s.native = native;
    s.tlsf = std::move(tlsf);
    s.dedicated = dedicated;
    bytes_reserved_ += block_bytes;
    bytes_reserved_peak_ = std::max(bytes_reserved_peak_, bytes_reserved_);
    return index;
}

void Heap::release_slot_locked(std::uint32_t index) noexcept {
    Slot& s = slots_[index];
    bytes_reserved_ -= s.tlsf->capacity_bytes();
    upstream_.deallocate_raw(s.native);
    s.tlsf.reset();
    s.native = {};
    s.dedicated = false;
    ++s.generation;
    vacant_.push_back(index);  // capacity kept >= slots_.size(): cannot throw
}

RawBlock Heap::place_locked(std::uint32_t index, const Allocation& a,
                            const AllocationRequest& request) const {
    const Slot& s = slots_[index];
    RawBlock b;
    b.kind = options_.kind;
    b.bytes = request.bytes;
    b.native = s.native.native;
    b.offset = s.native.offset + a.offset;
    b.host = s.native.host != nullptr ? s.native.host + a.offset : nullptr;
    b.cookie = make_cookie(index, s.generation);
    b.device_id = s.native.device_id;
    return b;
}

std::uint64_t Heap::bytes_used_locked() const noexcept {
    std::uint64_t used = 0;
    for (const Slot& s : slots_) {
        if (s.tlsf) used += s.tlsf->bytes_used();
    }
    return used;
}

std::uint64_t Heap::largest_free_locked() const noexcept {
    std::uint64_t largest = 0;
    for (const Slot& s : slots_) {
        if (s.tlsf && !s.dedicated) largest = std::max(largest, s.tlsf->largest_free_bytes());
    }
    return largest;
}

void Heap::throw_out_of_memory_locked(std::uint64_t requested_bytes, std::string_view reason) const {
    OutOfMemoryInfo info;
    info.requested_bytes = requested_bytes;
    info.tier = tier_of(options_.kind);
    // The budget that bound: the limit if there is one, else (never_grow) what is held.
    if (options_.limit_bytes != UINT64_MAX) {
        info.budget_bytes = options_.limit_bytes;
    } else if (options_.never_grow) {
        info.budget_bytes = bytes_reserved_;
    }
    info.in_use_bytes = bytes_used_locked();
    info.largest_free_bytes = largest_free_locked();
    throw OutOfMemory("heap", fmt::format("{} (heap holds {})", reason, format_size(bytes_reserved_)), info);
}

HeapStatistics Heap::statistics() const {
    const std::lock_guard lock(mutex_);
    HeapStatistics st;
    st.bytes_reserved = bytes_reserved_;
    st.bytes_reserved_peak = bytes_reserved_peak_;
    st.invalid_free_count = invalid_free_count_;
    for (const Slot& s : slots_) {
        if (!s.tlsf) continue;
        ++st.block_count;
        st.free_range_count += s.tlsf->free_block_count();
        st.bytes_used += s.tlsf->bytes_used();
        st.allocation_count += s.tlsf->allocation_count();
        st.largest_free_bytes = std::max(st.largest_free_bytes, s.tlsf->largest_free_bytes());
    }
    st.bytes_free = st.bytes_reserved - st.bytes_used;
    if (st.bytes_free != 0) {
        st.fragmentation =
            1.0 - static_cast<double>(st.largest_free_bytes) / static_cast<double>(st.bytes_free);
    }
    return st;
}

void Heap::validate() const {
    const std::lock_guard lock(mutex_);
    auto broken = [](const std::string& what) { throw InternalError("heap", "invariant broken: " + what); };
    std::uint64_t reserved = 0;
    std::uint64_t vacant_count = 0;
    for (std::uint32_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        if (!s.tlsf) {
            ++vacant_count;
            if (std::count(vacant_.begin(), vacant_.end(), i) != 1) {
                broken(fmt::format("vacant slot {} is not listed exactly once", i));
            }
            continue;
        }
        try {
            s.tlsf->validate();
        } catch (const InternalError& e) {
            broken(fmt::format("block {}: {}", i, e.what()));
        }
        if (s.tlsf->granularity_bytes() != alignment_bytes_)
            broken(fmt::format("block {} has a wrong granularity", i));
        if (s.dedicated && s.tlsf->allocation_count() == 0)
            broken(fmt::format("dedicated block {} is empty", i));
        if (s.native.kind != options_.kind) broken(fmt::format("block {} is of the wrong kind", i));
        if (s.native.offset % alignment_bytes_ != 0) broken(fmt::format("block {} is misaligned", i));
        reserved += s.tlsf->capacity_bytes();
    }
    if (vacant_count != vacant_.size()) broken("vacant list does not match the vacant slots");
    if (reserved != bytes_reserved_) {
        broken(fmt::format("blocks hold {} B but the heap counts {} B", reserved, bytes_reserved_));
    }
    if (bytes_reserved_peak_ < bytes_reserved_) broken("peak below current reservation");
    if (options_.within_budget && bytes_reserved_ > options_.limit_bytes) {
        broken(fmt::format("holds {} B, over its hard limit of {} B", bytes_reserved_, options_.limit_bytes));
    }
}

}  // namespace outcore::alloc
