// outcore/alloc/tlsf.hpp — a TLSF (two-level segregated fit) offset allocator.
//
// Tlsf manages the byte range [0, capacity) as pure offset arithmetic: it never
// touches the memory it manages (which is usually device memory) and makes no device
// calls, so it is tested on the CPU. Heap runs one Tlsf per native block.
//
//   outcore::alloc::Tlsf tlsf(1 * kGiB, /*granularity_bytes=*/256);
//   if (auto p = tlsf.find(64 * kMiB, 4096)) {       // pure lookup: nothing changes
//       outcore::alloc::Allocation a = tlsf.commit(*p);  // now it is taken
//       ...
//       tlsf.free(a.offset);
//   }
//   std::optional<Allocation> b = tlsf.allocate(1000);  // find + commit; nullopt: no room
//
// How it works: free blocks sit in 60 x 32 lists, the first level by floor(log2(size)),
// the second level splitting each power of two into 32 equal classes; two bitmaps say
// which lists are non-empty, so finding a block is a few bit scans (O(1)). A request is
// rounded up to the next class boundary (good fit): every block in that class fits, at
// the cost of not seeing a block of exactly the requested size in the request's own
// class. When that search fails, a bounded scan (kScanLimit blocks) of the request's own
// class and the next non-empty one catches exact fits (such as allocating the whole
// range), still O(1). Alignment above the granularity is handled by over-requesting
// (size + alignment - granularity) and splitting the leading gap off as a free block;
// the bounded scan also tries aligned fits without the pad. Freed blocks merge with free
// physical neighbours at once, so no two free blocks are ever adjacent.
//
// Block metadata lives in host-side vectors (nodes linked by index), never inside the
// managed range. Not thread-safe: the owner (Heap) locks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace outcore::alloc {

/// Where a request would go: the result of Tlsf::find, consumed by Tlsf::commit.
/// Valid only until the next commit/free/reset on the same Tlsf.
struct Placement {
    std::uint64_t offset = 0;  ///< first byte of the allocation, aligned as requested
    std::uint64_t bytes = 0;   ///< bytes taken: the request rounded up to the granularity
    // Which free block the placement is carved from; commit checks it is still there.
    std::uint32_t block_index = 0;
    std::uint64_t block_offset = 0;
};

/// One live allocation of a Tlsf.
struct Allocation {
    std::uint64_t offset = 0;  ///< first byte
    std::uint64_t bytes = 0;   ///< bytes taken (request rounded up to the granularity)
};

namespace detail {

/// Open-addressing hash map offset -> node index (linear probing, backward-shift
/// deletion). Lets Tlsf::free(offset) find its block in O(1) without a node-based map.
/// Used by tlsf.cpp only, which defines its inline members.
class OffsetIndex {
public:
    static constexpr std::uint32_t kAbsent = UINT32_MAX;

    OffsetIndex();
    /// The node at `offset`, or kAbsent.
    [[nodiscard]] inline std::uint32_t find(std::uint64_t offset) const noexcept;
    /// Adds offset -> node; `offset` must not be present.
    inline void insert(std::uint64_t offset, std::uint32_t node);
    /// Removes `offset`; returns its node, or kAbsent if it was not there.
    inline std::uint32_t erase(std::uint64_t offset) noexcept;
    void clear() noexcept;
    [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

private:
    // Offsets are below 2^63, so this can never be a real key.
    static constexpr std::uint64_t kEmptyKey = UINT64_MAX;
    [[nodiscard]] inline std::uint64_t home(std::uint64_t offset) const noexcept;
    void grow();

    std::vector<std::uint64_t> keys_;
    std::vector<std::uint32_t> nodes_;
    std::uint64_t mask_ = 0;
    unsigned shift_ = 0;
    std::uint64_t size_ = 0;
};

}  // namespace detail

class Tlsf {
public:
    /// Largest capacity a Tlsf can manage.
    static constexpr std::uint64_t kMaxCapacityBytes = std::uint64_t{1} << 63;
    /// Blocks the fallback scan of find() looks at, at most (twice: two classes).
    static constexpr unsigned kScanLimit = 16;

    /// Manages [0, capacity_bytes). Every allocation's size is rounded up to
    /// `granularity_bytes` (a power of two), so every block offset is a multiple of it
    /// and alignments up to it cost nothing. Throws UsageError for capacity 0 or over
    /// kMaxCapacityBytes, or a granularity that is not a power of two.
    explicit Tlsf(std::uint64_t capacity_bytes, std::uint64_t granularity_bytes = 1);

    /// Where `bytes` aligned to `alignment` (a power of two; any size up to 2^63) would
    /// go, or nullopt if no free block is found for it. Pure: changes nothing. O(1).
    /// Throws UsageError for 0 bytes or a bad alignment.
    [[nodiscard]] std::optional<Placement> find(std::uint64_t bytes, std::uint64_t alignment = 1) const;
    /// Takes the range `placement` describes. The placement must come from find() on
    /// this Tlsf with no commit/free/reset since; otherwise throws InternalError. O(1).
    Allocation commit(const Placement& placement);
    /// find + commit: the allocation, or nullopt if it does not fit. O(1).
    [[nodiscard]] std::optional<Allocation> allocate(std::uint64_t bytes, std::uint64_t alignment = 1);
    /// Frees the allocation starting at `offset` and merges it with free neighbours.
    /// O(1). Throws InternalError if no allocation starts there (a double or foreign
    /// free); the Tlsf is left unchanged then.
    void free(std::uint64_t offset);
    /// Frees everything: back to one free block [0, capacity).
    void reset();

    [[nodiscard]] std::uint64_t capacity_bytes() const noexcept { return capacity_bytes_; }
    [[nodiscard]] std::uint64_t granularity_bytes() const noexcept { return granularity_bytes_; }
    /// Bytes in live allocations (sizes rounded up to the granularity).
    [[nodiscard]] std::uint64_t bytes_used() const noexcept { return bytes_used_; }
    /// capacity - bytes_used.
    [[nodiscard]] std::uint64_t bytes_free() const noexcept { return capacity_bytes_ - bytes_used_; }
    /// Size of the largest free block. O(length of the largest non-empty class's list).
    [[nodiscard]] std::uint64_t largest_free_bytes() const noexcept;
    /// 1 - largest_free / bytes_free, in [0, 1); 0 when nothing is free.
    [[nodiscard]] double fragmentation() const noexcept;
    /// Live allocations.
    [[nodiscard]] std::uint64_t allocation_count() const noexcept { return allocation_count_; }
    /// Free blocks (1 when empty, 0 when full).
    [[nodiscard]] std::uint64_t free_block_count() const noexcept { return free_block_count_; }
    /// The smallest free block that find(bytes, alignment) is sure to use: a free
    /// block at least this large means find never returns nullopt. Saturates at
    /// UINT64_MAX. Pure arithmetic; a testable statement of the good-fit rule.
    [[nodiscard]] std::uint64_t sure_fit_bytes(std::uint64_t bytes,
                                               std::uint64_t alignment = 1) const noexcept;

    /// Walks every block and list and checks every invariant: blocks tile
    /// [0, capacity) in order with consistent links, no two adjacent free blocks, each
    /// free block in exactly the list of its class, bitmaps match the lists, the offset
    /// index holds exactly the live allocations, and the sums equal the statistics.
    /// O(blocks). Throws InternalError naming the broken invariant.
    void validate() const;

private:
    static constexpr unsigned kSlLog2 = 5;
    static constexpr unsigned kSlCount = 1U << kSlLog2;
    static constexpr unsigned kFlCount = 64 - kSlLog2 + 1;
    static constexpr std::uint32_t kNil = UINT32_MAX;

    struct Node {
        std::uint64_t offset = 0;
        std::uint64_t bytes = 0;
        std::uint32_t prev_phys = kNil;
        std::uint32_t next_phys = kNil;
        // Free-list links while free; next_free also chains unused nodes in the pool.
        std::uint32_t prev_free = kNil;
        std::uint32_t next_free = kNil;
        bool free = false;
    };
    struct ClassIndex {
        unsigned fl = 0;
        unsigned sl = 0;
    };

    // The hot helpers are declared inline (and defined in tlsf.cpp, their only user):
    // with -fPIC, GCC will not inline an out-of-line member it must assume interposable.
    [[nodiscard]] static inline ClassIndex class_of(std::uint64_t bytes) noexcept;
    [[nodiscard]] static inline std::uint64_t round_up_to_class(std::uint64_t bytes) noexcept;
    [[nodiscard]] inline std::uint32_t first_at_or_above(ClassIndex c) const noexcept;
    [[nodiscard]] static inline bool fits(const Node& n, std::uint64_t bytes,
                                          std::uint64_t alignment) noexcept;
    [[nodiscard]] std::uint32_t scan_list(std::uint32_t head, std::uint64_t bytes,
                                          std::uint64_t alignment) const noexcept;
    inline void insert_free(std::uint32_t index) noexcept;
    inline void remove_free(std::uint32_t index) noexcept;
    [[nodiscard]] inline std::uint32_t new_node();
    inline void release_node(std::uint32_t index) noexcept;
    [[noreturn]] void fail(const char* what) const;

    std::uint64_t capacity_bytes_;
    std::uint64_t granularity_bytes_;
    std::uint64_t bytes_used_ = 0;
    std::uint64_t allocation_count_ = 0;
    std::uint64_t free_block_count_ = 0;
    std::uint32_t first_ = kNil;        // the block at offset 0
    std::uint32_t spare_nodes_ = kNil;  // pool of unused nodes, chained by next_free
    std::uint64_t fl_bitmap_ = 0;
    std::array<std::uint32_t, kFlCount> sl_bitmap_{};
    std::array<std::array<std::uint32_t, kSlCount>, kFlCount> heads_{};
    std::vector<Node> nodes_;
    detail::OffsetIndex index_;
};

}  // namespace outcore::alloc
