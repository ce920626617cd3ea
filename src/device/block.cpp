#include "outcore/device/block.hpp"

#include <fmt/format.h>

#include "outcore/core/error.hpp"
#include "outcore/device/allocator.hpp"

namespace outcore {

Block& Block::operator=(Block&& other) noexcept {
    if (this != &other) {
        reset();
        owner_ = other.owner_;
        raw_ = other.raw_;
        other.owner_ = nullptr;
        other.raw_ = {};
    }
    return *this;
}

void Block::reset() noexcept {
    if (owner_ != nullptr) owner_->deallocate_raw(raw_);
    owner_ = nullptr;
    raw_ = {};
}

RawBlock Block::release() noexcept {
    const RawBlock raw = raw_;
    owner_ = nullptr;
    raw_ = {};
    return raw;
}

namespace {
void check_range(std::uint64_t block_bytes, std::uint64_t offset, std::uint64_t bytes) {
    if (offset > block_bytes || bytes > block_bytes - offset) {
        throw UsageError("buffer", fmt::format("range [{}, {}+{}) lies outside a block of {} bytes", offset,
                                               offset, bytes, block_bytes));
    }
}
}  // namespace

BufferView::BufferView(const Block& b, std::uint64_t off, std::uint64_t n) : BufferView(b.raw(), off, n) {}

BufferView::BufferView(const RawBlock& b, std::uint64_t off, std::uint64_t n)
    : block(b), offset(off), bytes(n) {
    check_range(b.bytes, off, n);
}

BufferView BufferView::sub(std::uint64_t off, std::uint64_t n) const {
    check_range(bytes, off, n);
    BufferView v = *this;
    v.offset = offset + off;
    v.bytes = n;
    return v;
}

}  // namespace outcore
