// outcore/device/block.hpp — one allocation (RawBlock), its RAII owner (Block), and a
// byte range inside it (BufferView).
//
//   outcore::Block b = device.allocate({.bytes = 64 * kMiB, .kind = MemoryKind::Device, .tag = "tile"});
//   queue.upload(src, outcore::BufferView(b));        // the whole block
//   queue.copy(BufferView(b, 0, 4096), BufferView(staging));
//   // b frees itself through the allocator that made it
//
// A RawBlock is plain data: what an allocator hands out and takes back. Sub-allocators
// (Heap) hand out RawBlocks that share their parent's native handle at an offset.
#pragma once

#include <cstddef>
#include <cstdint>

#include "outcore/device/memory_kind.hpp"

namespace outcore {

class Allocator;

/// One allocation as plain data.
struct RawBlock {
    MemoryKind kind = MemoryKind::Device;
    std::uint64_t bytes = 0;
    /// The backend's handle of the underlying native allocation: a device address
    /// (CUDA), a VkDeviceMemory (Vulkan), a host address (CPU).
    std::uintptr_t native = 0;
    /// Bytes from the start of that native allocation to this block's first byte.
    std::uint64_t offset = 0;
    /// Host address of the first byte (already offset), or nullptr if not host-visible.
    std::byte* host = nullptr;
    /// Private to the allocator that made the block (a heap's block index, a tag id).
    std::uint64_t cookie = 0;
    /// Id of the device whose memory this is (Device::id()), so queues can refuse
    /// foreign blocks. 0 for memory no device owns.
    std::uint64_t device_id = 0;

    [[nodiscard]] bool empty() const noexcept { return bytes == 0; }
};

/// Owns a RawBlock and gives it back to its allocator on destruction. Move-only.
/// The allocator must outlive the Block.
class Block {
public:
    Block() noexcept = default;
    Block(Allocator& owner, const RawBlock& raw) noexcept : owner_(&owner), raw_(raw) {}
    Block(Block&& other) noexcept : owner_(other.owner_), raw_(other.raw_) {
        other.owner_ = nullptr;
        other.raw_ = {};
    }
    Block& operator=(Block&& other) noexcept;
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    ~Block() { reset(); }

    [[nodiscard]] const RawBlock& raw() const noexcept { return raw_; }
    [[nodiscard]] MemoryKind kind() const noexcept { return raw_.kind; }
    [[nodiscard]] std::uint64_t bytes() const noexcept { return raw_.bytes; }
    /// Host address, or nullptr for Device memory.
    [[nodiscard]] std::byte* host() const noexcept { return raw_.host; }
    [[nodiscard]] Allocator* owner() const noexcept { return owner_; }
    explicit operator bool() const noexcept { return owner_ != nullptr; }

    /// Frees now (no-op when empty). noexcept.
    void reset() noexcept;
    /// Gives up ownership; the caller must deallocate_raw the result on the owner.
    [[nodiscard]] RawBlock release() noexcept;

private:
    Allocator* owner_ = nullptr;
    RawBlock raw_{};
};

/// A byte range [offset, offset + bytes) of a block. Cheap to copy; does not own.
struct BufferView {
    RawBlock block{};
    std::uint64_t offset = 0;
    std::uint64_t bytes = 0;

    BufferView() = default;
    /// The whole block.
    BufferView(const Block& b) noexcept : BufferView(b.raw()) {}  // NOLINT(google-explicit-constructor)
    BufferView(const RawBlock& b) noexcept
        : block(b), bytes(b.bytes) {}  // NOLINT(google-explicit-constructor)
    /// A sub-range; throws UsageError if it does not lie inside the block.
    BufferView(const Block& b, std::uint64_t offset, std::uint64_t bytes);
    BufferView(const RawBlock& b, std::uint64_t offset, std::uint64_t bytes);

    /// A sub-range of this view; throws UsageError if out of range.
    [[nodiscard]] BufferView sub(std::uint64_t offset, std::uint64_t bytes) const;
    /// Host address of the first byte, or nullptr if not host-visible.
    [[nodiscard]] std::byte* host() const noexcept { return block.host ? block.host + offset : nullptr; }
    /// Offset from the start of the native allocation (what a binding or pointer needs).
    [[nodiscard]] std::uint64_t native_offset() const noexcept { return block.offset + offset; }
};

}  // namespace outcore
