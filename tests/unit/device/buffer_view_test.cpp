#include <gtest/gtest.h>

#include "outcore/core/error.hpp"
#include "outcore/device/block.hpp"
#include "outcore/device/device_info.hpp"

namespace outcore {
namespace {

TEST(BufferView, SubRangesStayInsideTheirBlock) {
    RawBlock raw{.kind = MemoryKind::HostPinned, .bytes = 1000, .native = 0, .offset = 24};
    const BufferView whole(raw);
    EXPECT_EQ(whole.bytes, 1000U);
    const BufferView part(raw, 100, 900);
    EXPECT_EQ(part.native_offset(), 124U);
    const BufferView inner = part.sub(50, 850);
    EXPECT_EQ(inner.offset, 150U);
    EXPECT_EQ(inner.native_offset(), 174U);
    EXPECT_THROW(BufferView(raw, 100, 901), UsageError);
    EXPECT_THROW(BufferView(raw, 1001, 0), UsageError);
    EXPECT_THROW((void)part.sub(1, 900), UsageError);
    EXPECT_THROW(BufferView(raw, 1, UINT64_MAX), UsageError);  // offset + bytes would wrap
    EXPECT_NO_THROW(BufferView(raw, 1000, 0));
}

TEST(BufferView, HostAddressFollowsTheOffset) {
    std::byte storage[64]{};
    RawBlock raw{.kind = MemoryKind::HostPinned, .bytes = 64, .host = storage};
    EXPECT_EQ(BufferView(raw, 8, 8).host(), storage + 8);
    RawBlock dev{.kind = MemoryKind::Device, .bytes = 64};
    EXPECT_EQ(BufferView(dev, 8, 8).host(), nullptr);
}

TEST(DeviceInfo, InlineRuleIsOneComparison) {
    DeviceInfo info;
    info.max_inline_bytes = 4096;
    EXPECT_TRUE(fits_inline(info, 4096));
    EXPECT_FALSE(fits_inline(info, 4097));
    info.backend = "cuda";
    info.index = 1;
    EXPECT_EQ(info.id(), "cuda:1");
}

}  // namespace
}  // namespace outcore
