// TLSF offset allocator: see include/outcore/alloc/tlsf.hpp for the scheme.
#include "outcore/alloc/tlsf.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"

namespace outcore::alloc {

namespace detail {

namespace {
constexpr std::uint64_t kInitialSlots = 64;
constexpr std::uint64_t kFibonacci = 0x9E3779B97F4A7C15ULL;
}  // namespace

OffsetIndex::OffsetIndex() { clear(); }

std::uint64_t OffsetIndex::home(std::uint64_t offset) const noexcept {
    // Fibonacci hashing: offsets are often multiples of 256, the top bits of the
    // product spread them anyway.
    return (offset * kFibonacci) >> shift_;
}

std::uint32_t OffsetIndex::find(std::uint64_t offset) const noexcept {
    for (std::uint64_t i = home(offset);; i = (i + 1) & mask_) {
        if (keys_[i] == offset) return nodes_[i];
        if (keys_[i] == kEmptyKey) return kAbsent;
    }
}

void OffsetIndex::insert(std::uint64_t offset, std::uint32_t node) {
    // Keep the load at most 1/2 so probe sequences stay short.
    if ((size_ + 1) * 2 > keys_.size()) grow();
    std::uint64_t i = home(offset);
    while (keys_[i] != kEmptyKey) i = (i + 1) & mask_;
    keys_[i] = offset;
    nodes_[i] = node;
    ++size_;
}

std::uint32_t OffsetIndex::erase(std::uint64_t offset) noexcept {
    std::uint64_t hole = home(offset);
    while (keys_[hole] != offset) {
        if (keys_[hole] == kEmptyKey) return kAbsent;
        hole = (hole + 1) & mask_;
    }
    const std::uint32_t node = nodes_[hole];
    // Backward-shift deletion: pull later entries of the probe run into the hole
    // unless their home lies cyclically in (hole, j], so no tombstones are needed.
    for (std::uint64_t j = (hole + 1) & mask_; keys_[j] != kEmptyKey; j = (j + 1) & mask_) {
        const std::uint64_t k = home(keys_[j]);
        const bool home_between = hole <= j ? (hole < k && k <= j) : (hole < k || k <= j);
        if (!home_between) {
            keys_[hole] = keys_[j];
            nodes_[hole] = nodes_[j];
            hole = j;
        }
    }
    keys_[hole] = kEmptyKey;
    --size_;
    return node;
}

void OffsetIndex::clear() noexcept {
    // Allocation of the small initial table happens once, in the constructor; later
    // clears keep the grown table.
    if (keys_.empty()) {
        keys_.assign(kInitialSlots, kEmptyKey);
        nodes_.assign(kInitialSlots, 0);
        mask_ = kInitialSlots - 1;
        shift_ = 64 - static_cast<unsigned>(std::countr_zero(kInitialSlots));
    } else {
        std::fill(keys_.begin(), keys_.end(), kEmptyKey);
    }
    size_ = 0;
}

void OffsetIndex::grow() {
    std::vector<std::uint64_t> old_keys(keys_.size() * 2, kEmptyKey);
    std::vector<std::uint32_t> old_nodes(nodes_.size() * 2, 0);
    old_keys.swap(keys_);
    old_nodes.swap(nodes_);
    mask_ = keys_.size() - 1;
    shift_ = 64 - static_cast<unsigned>(std::countr_zero(keys_.size()));
    for (std::size_t i = 0; i < old_keys.size(); ++i) {
        if (old_keys[i] == kEmptyKey) continue;
        std::uint64_t j = home(old_keys[i]);
        while (keys_[j] != kEmptyKey) j = (j + 1) & mask_;
        keys_[j] = old_keys[i];
        nodes_[j] = old_nodes[i];
    }
}

}  // namespace detail

namespace {

[[nodiscard]] unsigned floor_log2(std::uint64_t v) noexcept {
    return 63U - static_cast<unsigned>(std::countl_zero(v));
}

}  // namespace

Tlsf::Tlsf(std::uint64_t capacity_bytes, std::uint64_t granularity_bytes)
    : capacity_bytes_(capacity_bytes), granularity_bytes_(granularity_bytes) {
    if (capacity_bytes == 0 || capacity_bytes > kMaxCapacityBytes) {
        throw UsageError("tlsf", fmt::format("capacity must be 1 B .. 2^63 B (got {} B)", capacity_bytes));
    }
    if (!is_power_of_two(granularity_bytes)) {
        throw UsageError("tlsf",
                         fmt::format("granularity must be a power of two (got {})", granularity_bytes));
    }
    for (auto& row : heads_) row.fill(kNil);
    nodes_.reserve(64);
    reset();
}

Tlsf::ClassIndex Tlsf::class_of(std::uint64_t bytes) noexcept {
    // Sizes below kSlCount get one class each (first level 0); above, the first level
    // is log2 and the second the next kSlLog2 bits.
    if (bytes < kSlCount) return {0, static_cast<unsigned>(bytes)};
    const unsigned l = floor_log2(bytes);
    return {l - kSlLog2 + 1, static_cast<unsigned>(bytes >> (l - kSlLog2)) - kSlCount};
}

std::uint64_t Tlsf::round_up_to_class(std::uint64_t bytes) noexcept {
    if (bytes < kSlCount) return bytes;
    const std::uint64_t width = std::uint64_t{1} << (floor_log2(bytes) - kSlLog2);
    if (bytes > UINT64_MAX - (width - 1)) return UINT64_MAX;
    return (bytes + width - 1) & ~(width - 1);
}

std::uint32_t Tlsf::first_at_or_above(ClassIndex c) const noexcept {
    std::uint32_t sl_map = sl_bitmap_[c.fl] & (~0U << c.sl);
    unsigned fl = c.fl;
    if (sl_map == 0) {
        const std::uint64_t fl_map = (fl + 1 < 64) ? fl_bitmap_ & (~std::uint64_t{0} << (fl + 1)) : 0;
        if (fl_map == 0) return kNil;
        fl = static_cast<unsigned>(std::countr_zero(fl_map));
        sl_map = sl_bitmap_[fl];
    }
    return heads_[fl][static_cast<unsigned>(std::countr_zero(sl_map))];
}

bool Tlsf::fits(const Node& n, std::uint64_t bytes, std::uint64_t alignment) noexcept {
    // offset < 2^63 and alignment <= 2^63, so align_up cannot wrap.
    const std::uint64_t gap = align_up(n.offset, alignment) - n.offset;
    return gap <= n.bytes && n.bytes - gap >= bytes;
}

std::uint32_t Tlsf::scan_list(std::uint32_t head, std::uint64_t bytes,
                              std::uint64_t alignment) const noexcept {
    unsigned seen = 0;
    for (std::uint32_t i = head; i != kNil && seen < kScanLimit; i = nodes_[i].next_free, ++seen) {
        if (fits(nodes_[i], bytes, alignment)) return i;
    }
    return kNil;
}

std::uint64_t Tlsf::sure_fit_bytes(std::uint64_t bytes, std::uint64_t alignment) const noexcept {
    if (bytes == 0 || bytes > kMaxCapacityBytes || alignment > kMaxCapacityBytes) return UINT64_MAX;
    const std::uint64_t size = align_up(bytes, granularity_bytes_);
    const std::uint64_t pad = alignment > granularity_bytes_ ? alignment - granularity_bytes_ : 0;
    return round_up_to_class(size + pad);
}

std::optional<Placement> Tlsf::find(std::uint64_t bytes, std::uint64_t alignment) const {
    if (bytes == 0) throw UsageError("tlsf", "cannot allocate 0 bytes");
    if (!is_power_of_two(alignment)) {
        throw UsageError("tlsf", fmt::format("alignment must be a power of two (got {})", alignment));
    }
    if (bytes > capacity_bytes_ || alignment > kMaxCapacityBytes) return std::nullopt;
    const std::uint64_t size = align_up(bytes, granularity_bytes_);
    if (size > capacity_bytes_) return std::nullopt;
    // Offsets are multiples of the granularity, so the leading gap is at most this.
    const std::uint64_t pad = alignment > granularity_bytes_ ? alignment - granularity_bytes_ : 0;

    std::uint32_t found = kNil;
    if (pad <= capacity_bytes_ - size) {
        found = first_at_or_above(class_of(round_up_to_class(size + pad)));
    }
    if (found == kNil) {
        // Good fit missed: look (boundedly) at blocks the rounding skipped, and at
        // blocks that fit once aligned without the worst-case pad.
        found = scan_list(heads_[class_of(size).fl][class_of(size).sl], size, alignment);
        if (found == kNil && pad != 0) {
            found = scan_list(first_at_or_above(class_of(round_up_to_class(size))), size, alignment);
        }
        if (found == kNil) return std::nullopt;
    }
    const Node& n = nodes_[found];
    return Placement{align_up(n.offset, alignment), size, found, n.offset};
}

Allocation Tlsf::commit(const Placement& p) {
    if (p.block_index >= nodes_.size()) fail("commit: placement names no block");
    {
        const Node& n = nodes_[p.block_index];
        if (!n.free || n.offset != p.block_offset || p.offset < n.offset || p.bytes == 0 ||
            p.offset % granularity_bytes_ != 0 || p.bytes % granularity_bytes_ != 0 ||
            p.offset - n.offset > n.bytes || n.bytes - (p.offset - n.offset) < p.bytes) {
            fail("commit: stale placement (the block changed since find)");
        }
    }
    // Make room for the index entry and the up to two split-off nodes first, so a
    // bad_alloc leaves the Tlsf unchanged.
    const std::uint32_t block = p.block_index;
    std::uint32_t gap_node = kNil;
    std::uint32_t tail_node = kNil;
    const std::uint64_t gap = p.offset - nodes_[block].offset;
    const std::uint64_t tail = nodes_[block].bytes - gap - p.bytes;
    if (gap != 0) gap_node = new_node();
    if (tail != 0) {
        try {
            tail_node = new_node();
        } catch (...) {
            if (gap_node != kNil) release_node(gap_node);
            throw;
        }
    }
    try {
        index_.insert(p.offset, block);
    } catch (...) {
        if (gap_node != kNil) release_node(gap_node);
        if (tail_node != kNil) release_node(tail_node);
        throw;
    }

    remove_free(block);
    if (gap_node != kNil) {
        Node& g = nodes_[gap_node];
        Node& n = nodes_[block];
        g.offset = n.offset;
        g.bytes = gap;
        g.prev_phys = n.prev_phys;
        g.next_phys = block;
        if (n.prev_phys != kNil) {
            nodes_[n.prev_phys].next_phys = gap_node;
        } else {
            first_ = gap_node;
        }
        n.prev_phys = gap_node;
        n.offset = p.offset;
        n.bytes -= gap;
        insert_free(gap_node);
    }
    if (tail_node != kNil) {
        Node& t = nodes_[tail_node];
        Node& n = nodes_[block];
        t.offset = p.offset + p.bytes;
        t.bytes = tail;
        t.prev_phys = block;
        t.next_phys = n.next_phys;
        if (n.next_phys != kNil) nodes_[n.next_phys].prev_phys = tail_node;
        n.next_phys = tail_node;
        n.bytes = p.bytes;
        insert_free(tail_node);
    }
    nodes_[block].free = false;
    bytes_used_ += p.bytes;
    ++allocation_count_;
    return Allocation{p.offset, p.bytes};
}

std::optional<Allocation> Tlsf::allocate(std::uint64_t bytes, std::uint64_t alignment) {
    const std::optional<Placement> p = find(bytes, alignment);
    if (!p) return std::nullopt;
    return commit(*p);
}

void Tlsf::free(std::uint64_t offset) {
    std::uint32_t block = index_.erase(offset);
    if (block == kNil) {
        throw InternalError("tlsf", fmt::format("free of offset {} that is not a live allocation", offset));
    }
    bytes_used_ -= nodes_[block].bytes;
    --allocation_count_;
    nodes_[block].free = true;

    const std::uint32_t prev = nodes_[block].prev_phys;
    if (prev != kNil && nodes_[prev].free) {
        remove_free(prev);
        Node& p = nodes_[prev];
        const Node& n = nodes_[block];
        p.bytes += n.bytes;
        p.next_phys = n.next_phys;
        if (n.next_phys != kNil) nodes_[n.next_phys].prev_phys = prev;
        release_node(block);
        block = prev;
    }
    const std::uint32_t next = nodes_[block].next_phys;
    if (next != kNil && nodes_[next].free) {
        remove_free(next);
        Node& n = nodes_[block];
        const Node& x = nodes_[next];
        n.bytes += x.bytes;
        n.next_phys = x.next_phys;
        if (x.next_phys != kNil) nodes_[x.next_phys].prev_phys = block;
        release_node(next);
    }
    insert_free(block);
}

void Tlsf::reset() {
    nodes_.clear();
    spare_nodes_ = kNil;
    index_.clear();
    fl_bitmap_ = 0;
    sl_bitmap_.fill(0);
    for (auto& row : heads_) row.fill(kNil);
    bytes_used_ = 0;
    allocation_count_ = 0;
    free_block_count_ = 0;
    first_ = new_node();
    Node& n = nodes_[first_];
    n.offset = 0;
    n.bytes = capacity_bytes_;
    n.free = true;
    insert_free(first_);
}

std::uint64_t Tlsf::largest_free_bytes() const noexcept {
    if (fl_bitmap_ == 0) return 0;
    const unsigned fl = floor_log2(fl_bitmap_);
    const unsigned sl = 31U - static_cast<unsigned>(std::countl_zero(sl_bitmap_[fl]));
    std::uint64_t largest = 0;
    for (std::uint32_t i = heads_[fl][sl]; i != kNil; i = nodes_[i].next_free) {
        largest = std::max(largest, nodes_[i].bytes);
    }
    return largest;
}

double Tlsf::fragmentation() const noexcept {
    const std::uint64_t free_bytes = bytes_free();
    if (free_bytes == 0) return 0.0;
    return 1.0 - static_cast<double>(largest_free_bytes()) / static_cast<double>(free_bytes);
}

void Tlsf::insert_free(std::uint32_t index) noexcept {
    Node& n = nodes_[index];
    const ClassIndex c = class_of(n.bytes);
    std::uint32_t& head = heads_[c.fl][c.sl];
    n.free = true;
    n.prev_free = kNil;
    n.next_free = head;
    if (head != kNil) nodes_[head].prev_free = index;
    head = index;
    sl_bitmap_[c.fl] |= 1U << c.sl;
    fl_bitmap_ |= std::uint64_t{1} << c.fl;
    ++free_block_count_;
}

void Tlsf::remove_free(std::uint32_t index) noexcept {
    Node& n = nodes_[index];
    const ClassIndex c = class_of(n.bytes);
    if (n.prev_free != kNil) {
        nodes_[n.prev_free].next_free = n.next_free;
    } else {
        heads_[c.fl][c.sl] = n.next_free;
        if (n.next_free == kNil) {
            sl_bitmap_[c.fl] &= ~(1U << c.sl);
            if (sl_bitmap_[c.fl] == 0) fl_bitmap_ &= ~(std::uint64_t{1} << c.fl);
        }
    }
    if (n.next_free != kNil) nodes_[n.next_free].prev_free = n.prev_free;
    n.prev_free = kNil;
    n.next_free = kNil;
    --free_block_count_;
}

std::uint32_t Tlsf::new_node() {
    if (spare_nodes_ != kNil) {
        const std::uint32_t index = spare_nodes_;
        spare_nodes_ = nodes_[index].next_free;
        nodes_[index] = Node{};
        return index;
    }
    if (nodes_.size() >= kNil) fail("more than 2^32 - 1 blocks");
    nodes_.emplace_back();
    return static_cast<std::uint32_t>(nodes_.size() - 1);
}

void Tlsf::release_node(std::uint32_t index) noexcept {
    nodes_[index] = Node{};
    nodes_[index].next_free = spare_nodes_;
    spare_nodes_ = index;
}

void Tlsf::fail(const char* what) const { throw InternalError("tlsf", what); }

void Tlsf::validate() const {
    auto broken = [](const std::string& what) { throw InternalError("tlsf", "invariant broken: " + what); };
    // Raw pointers, not operator[]: validate runs after every step of the stress
    // tests, in Debug builds too.
    const Node* const nodes = nodes_.data();
    const std::size_t node_count = nodes_.size();

    // Physical chain: tiles [0, capacity) in order, links agree, no adjacent frees,
    // every free block's class marked non-empty.
    std::uint64_t expected_offset = 0;
    std::uint64_t used = 0;
    std::uint64_t used_count = 0;
    std::uint64_t free_count = 0;
    std::uint64_t block_count = 0;
    std::uint32_t prev = kNil;
    if (first_ == kNil || first_ >= node_count) broken("no first block");
    for (std::uint32_t i = first_; i != kNil; i = nodes[i].next_phys) {
        if (i >= node_count) broken(fmt::format("block link {} out of range", i));
        if (++block_count > node_count) broken("cycle in the physical chain");
        const Node& n = nodes[i];
        if (n.prev_phys != prev) broken(fmt::format("block at {}: prev link does not match", n.offset));
        if (n.offset != expected_offset) {
            broken(fmt::format("block at {} should start at {} (gap or overlap)", n.offset, expected_offset));
        }
        if (n.bytes == 0) broken(fmt::format("block at {} is empty", n.offset));
        if (n.bytes > capacity_bytes_ - n.offset)
            broken(fmt::format("block at {} runs past the end", n.offset));
        if (n.offset % granularity_bytes_ != 0)
            broken(fmt::format("block at {} is off the granularity", n.offset));
        if (n.free) {
            ++free_count;
            if (prev != kNil && nodes[prev].free) {
                broken(fmt::format("free blocks at {} and before it are adjacent", n.offset));
            }
            const ClassIndex c = class_of(n.bytes);
            if (((sl_bitmap_[c.fl] >> c.sl) & 1U) == 0)
                broken(fmt::format("free block at {}: class bit clear", n.offset));
        } else {
            ++used_count;
            used += n.bytes;
            if (index_.find(n.offset) != i)
                broken(fmt::format("allocation at {} missing from the index", n.offset));
        }
        expected_offset = n.offset + n.bytes;
        prev = i;
    }
    if (expected_offset != capacity_bytes_) {
        broken(fmt::format("blocks end at {}, capacity is {}", expected_offset, capacity_bytes_));
    }

    // Free lists and bitmaps: a list is non-empty exactly when its bit is set, and
    // holds only free blocks of its class, doubly linked.
    static const std::array<std::uint32_t, kSlCount> kEmptyRow = [] {
        std::array<std::uint32_t, kSlCount> row{};
        row.fill(kNil);
        return row;
    }();
    std::uint64_t listed = 0;
    for (unsigned fl = 0; fl < kFlCount; ++fl) {
        const bool fl_bit = ((fl_bitmap_ >> fl) & 1U) != 0;
        if (fl_bit != (sl_bitmap_[fl] != 0))
            broken(fmt::format("first-level bit {} disagrees with its row", fl));
        if (sl_bitmap_[fl] == 0) {
            if (std::memcmp(heads_[fl].data(), kEmptyRow.data(), sizeof kEmptyRow) != 0) {
                broken(fmt::format("row {} has a list but no bits", fl));
            }
            continue;
        }
        for (unsigned sl = 0; sl < kSlCount; ++sl) {
            const std::uint32_t head = heads_[fl][sl];
            const bool sl_bit = ((sl_bitmap_[fl] >> sl) & 1U) != 0;
            if (sl_bit != (head != kNil)) broken(fmt::format("bit ({}, {}) disagrees with its list", fl, sl));
            std::uint32_t prev_free = kNil;
            for (std::uint32_t i = head; i != kNil; i = nodes[i].next_free) {
                if (i >= node_count) broken("free-list link out of range");
                if (++listed > free_count) broken("free lists hold more blocks than are free (or a cycle)");
                const Node& n = nodes[i];
                if (!n.free) broken(fmt::format("used block at {} is in a free list", n.offset));
                const ClassIndex c = class_of(n.bytes);
                if (c.fl != fl || c.sl != sl)
                    broken(fmt::format("free block at {} is in the wrong list", n.offset));
                if (n.prev_free != prev_free)
                    broken(fmt::format("free block at {}: prev link does not match", n.offset));
                prev_free = i;
            }
        }
    }
    if (listed != free_count) broken(fmt::format("{} free blocks but {} listed", free_count, listed));

    if (used != bytes_used_) broken(fmt::format("used bytes {} but statistics say {}", used, bytes_used_));
    if (used_count != allocation_count_) {
        broken(fmt::format("{} allocations but statistics say {}", used_count, allocation_count_));
    }
    if (free_count != free_block_count_) {
        broken(fmt::format("{} free blocks but statistics say {}", free_count, free_block_count_));
    }
    if (index_.size() != used_count)
        broken(fmt::format("index holds {} entries, {} allocations", index_.size(), used_count));

    // Every node not in the chain is in the spare pool.
    std::uint64_t spare = 0;
    for (std::uint32_t i = spare_nodes_; i != kNil; i = nodes[i].next_free) {
        if (i >= node_count || ++spare > node_count) broken("spare-node chain broken");
    }
    if (spare + block_count != node_count) {
        broken(fmt::format("{} nodes: {} blocks + {} spare", node_count, block_count, spare));
    }
}

}  // namespace outcore::alloc
