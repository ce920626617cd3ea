#include "vulkan_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "outcore/core/error.hpp"
#include "vulkan_check.hpp"
#include "vulkan_device.hpp"
#include "vulkan_queue.hpp"

namespace outcore::vulkan {

namespace {

/// Push constants of gemm_f32.comp, in its declaration order.
struct GemmPush {
    std::uint32_t m, n, k;
    std::uint32_t lda, ldb, ldc;
    std::uint32_t a_off, b_off, c_off;
    std::uint32_t trans_a, trans_b;
    float alpha, beta;
};

constexpr std::uint32_t kGemmBlock = 64;  // BM = BN of the shader

/// A view bound as a storage buffer: the binding starts at the view's offset rounded
/// down to the device's alignment; `element` is where the view starts from there.
struct Binding {
    VkDescriptorBufferInfo info{};
    std::uint32_t element = 0;
};

Binding bind(VulkanDevice& device, VkBuffer buffer, const BufferView& view, std::uint64_t element_bytes,
             const char* name) {
    const DeviceInfo& info = device.info();
    const std::uint64_t align =
        std::max<std::uint64_t>(device.context().limits().minStorageBufferOffsetAlignment, 1);
    const std::uint64_t start = view.native_offset();
    const std::uint64_t base = start / align * align;
    if ((start - base) % element_bytes != 0) {
        throw UsageError("gemm", fmt::format("{} starts at byte {}, not a multiple of its {}-byte elements",
                                             name, start, element_bytes));
    }
    const std::uint64_t range = start + view.bytes - base;
    if (range > info.max_buffer_bytes) {
        throw UsageError("gemm",
                         fmt::format("{} spans {} bytes, above the device's storage-buffer range of {}", name,
                                     range, info.max_buffer_bytes));
    }
    return Binding{.info = {.buffer = buffer, .offset = base, .range = range},
                   .element = static_cast<std::uint32_t>((start - base) / element_bytes)};
}

std::uint32_t u32(std::uint64_t v, const char* what) {
    if (v > UINT32_MAX) throw UsageError("gemm", fmt::format("{} = {} is above 2^32 - 1", what, v));
    return static_cast<std::uint32_t>(v);
}

}  // namespace

// --- ComputePipeline ----------------------------------------------------------------

ComputePipeline::ComputePipeline(VkDevice device, std::span<const std::uint32_t> spirv, std::uint32_t buffers,
                                 std::uint32_t push_bytes)
    : device_(device) {
    try {
        std::vector<VkDescriptorSetLayoutBinding> b(buffers);
        for (std::uint32_t i = 0; i < buffers; ++i) {
            b[i] = {.binding = i,
                    .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    .descriptorCount = 1,
                    .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
                    .pImmutableSamplers = nullptr};
        }
        const VkDescriptorSetLayoutCreateInfo sl{
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            .pNext = nullptr,
            .flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
            .bindingCount = buffers,
            .pBindings = b.data()};
        OUTCORE_VK_CHECK(vkCreateDescriptorSetLayout(device_, &sl, nullptr, &set_layout_));
        const VkPushConstantRange range{
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = push_bytes};
        const VkPipelineLayoutCreateInfo pl{.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                            .pNext = nullptr,
                                            .flags = 0,
                                            .setLayoutCount = 1,
                                            .pSetLayouts = &set_layout_,
                                            .pushConstantRangeCount = 1,
                                            .pPushConstantRanges = &range};
        OUTCORE_VK_CHECK(vkCreatePipelineLayout(device_, &pl, nullptr, &layout_));
        const VkShaderModuleCreateInfo sm{.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                          .pNext = nullptr,
                                          .flags = 0,
                                          .codeSize = spirv.size_bytes(),
                                          .pCode = spirv.data()};
        OUTCORE_VK_CHECK(vkCreateShaderModule(device_, &sm, nullptr, &module_));
        const VkComputePipelineCreateInfo cp{
            .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
            .pNext = nullptr,
            .flags = 0,
            .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                      .pNext = nullptr,
                      .flags = 0,
                      .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                      .module = module_,
                      .pName = "main",
                      .pSpecializationInfo = nullptr},
            .layout = layout_,
            .basePipelineHandle = VK_NULL_HANDLE,
            .basePipelineIndex = -1};
        OUTCORE_VK_CHECK(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cp, nullptr, &pipeline_));
    } catch (...) {
        this->~ComputePipeline();
        throw;
    }
}

ComputePipeline::~ComputePipeline() {
    if (pipeline_ != VK_NULL_HANDLE) vkDestroyPipeline(device_, pipeline_, nullptr);
    if (module_ != VK_NULL_HANDLE) vkDestroyShaderModule(device_, module_, nullptr);
    if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
    if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    pipeline_ = VK_NULL_HANDLE;
    module_ = VK_NULL_HANDLE;
    layout_ = VK_NULL_HANDLE;
    set_layout_ = VK_NULL_HANDLE;
}

// --- VulkanKernels ------------------------------------------------------------------

VulkanKernels::VulkanKernels(VulkanDevice& device)
    : device_(device), gemm_f32_(device.context().device(), spirv_gemm_f32(), 3, sizeof(GemmPush)) {}

bool VulkanKernels::do_supports_gemm(DType type, GemmCompute compute) const noexcept {
    return type == DType::F32 && compute == GemmCompute::Exact;
}

void VulkanKernels::do_gemm(Queue& queue, const GemmTileArgs& args) {
    VulkanQueue& q = vulkan_queue(queue, "gemm");
    if (args.m == 0 || args.n == 0) return;
    const VkPhysicalDeviceLimits& limits = device_.context().limits();
    const std::uint64_t groups_m = (args.m + kGemmBlock - 1) / kGemmBlock;
    const std::uint64_t groups_n = (args.n + kGemmBlock - 1) / kGemmBlock;
    if (groups_m > limits.maxComputeWorkGroupCount[0] || groups_n > limits.maxComputeWorkGroupCount[1]) {
        throw UsageError("gemm", fmt::format("a {}x{} tile needs more workgroups than the device dispatches "
                                             "({} x {})",
                                             args.m, args.n, limits.maxComputeWorkGroupCount[0],
                                             limits.maxComputeWorkGroupCount[1]));
    }
    const Binding a = bind(device_, q.buffer_of(args.a), args.a, 4, "A");
    const Binding b = bind(device_, q.buffer_of(args.b), args.b, 4, "B");
    const Binding c = bind(device_, q.buffer_of(args.c), args.c, 4, "C");
    const GemmPush push{.m = u32(args.m, "m"),
                        .n = u32(args.n, "n"),
                        .k = u32(args.k, "k"),
                        .lda = u32(args.lda, "lda"),
                        .ldb = u32(args.ldb, "ldb"),
                        .ldc = u32(args.ldc, "ldc"),
                        .a_off = a.element,
                        .b_off = b.element,
                        .c_off = c.element,
                        .trans_a = args.trans_a ? 1U : 0U,
                        .trans_b = args.trans_b ? 1U : 0U,
                        .alpha = static_cast<float>(args.alpha),
                        .beta = static_cast<float>(args.beta)};
    const std::array<VkDescriptorBufferInfo, 3> infos{a.info, b.info, c.info};
    const auto gx = static_cast<std::uint32_t>(groups_m);
    const auto gy = static_cast<std::uint32_t>(groups_n);
    q.enqueue_batched([this, &q, push, infos, gx, gy] {
        VkCommandBuffer cmd = q.commands();
        std::array<VkWriteDescriptorSet, 3> writes{};
        for (std::uint32_t i = 0; i < 3; ++i) {
            writes[i] = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                         .pNext = nullptr,
                         .dstSet = VK_NULL_HANDLE,
                         .dstBinding = i,
                         .dstArrayElement = 0,
                         .descriptorCount = 1,
                         .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                         .pImageInfo = nullptr,
                         .pBufferInfo = &infos[i],
                         .pTexelBufferView = nullptr};
        }
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, gemm_f32_.pipeline());
        device_.context().push_descriptor()(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, gemm_f32_.layout(), 0, 3,
                                            writes.data());
        vkCmdPushConstants(cmd, gemm_f32_.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
        vkCmdDispatch(cmd, gx, gy, 1);
    });
}

void VulkanKernels::do_pad_edges(Queue& queue, const PadEdgesArgs& args) {
    VulkanQueue& q = vulkan_queue(queue, "pad_edges");
    const EdgePadding& a = args.area;
    const std::uint64_t px = a.pixel_bytes;
    const auto rows = static_cast<std::int64_t>(a.rows);
    const auto cols = static_cast<std::int64_t>(a.cols);
    const auto image_rows = static_cast<std::int64_t>(a.image_rows);
    const auto image_cols = static_cast<std::int64_t>(a.image_cols);
    const std::int64_t col_lo = std::max<std::int64_t>(a.left, 0);
    const std::int64_t col_hi = std::min(a.left + cols, image_cols);
    const std::uint64_t base = args.buffer.native_offset();
    auto at = [&](std::int64_t image_row, std::int64_t image_col) {
        return base + static_cast<std::uint64_t>(image_row - a.top) * a.row_stride +
               static_cast<std::uint64_t>(image_col - a.left) * px;
    };
    // Every outside pixel (or run of them) copied from its source inside the image;
    // with EdgeMode::Zero, from a zeroed staging row instead (srcOffset marked by
    // kZero, resolved on the worker once the staging row exists).
    constexpr std::uint64_t kZero = UINT64_MAX;
    std::vector<VkBufferCopy> regions;
    const bool zero = a.edge == EdgeMode::Zero;
    for (std::int64_t y = 0; y < rows; ++y) {
        const std::int64_t r = a.top + y;
        const bool row_inside = r >= 0 && r < image_rows;
        const std::int64_t src_r = edge_source_index(r, image_rows, a.edge);
        if (!row_inside) {
            if (zero) {
                regions.push_back({.srcOffset = kZero, .dstOffset = at(r, a.left), .size = a.cols * px});
                continue;
            }
            if (col_hi > col_lo) {
                regions.push_back({.srcOffset = at(src_r, col_lo),
                                   .dstOffset = at(r, col_lo),
                                   .size = static_cast<std::uint64_t>(col_hi - col_lo) * px});
            }
        }
        const std::int64_t from_r = row_inside ? r : src_r;
        auto outside_run = [&](std::int64_t c0, std::int64_t c1) {
            if (c1 <= c0) return;
            if (zero) {
                regions.push_back({.srcOffset = kZero,
                                   .dstOffset = at(r, c0),
                                   .size = static_cast<std::uint64_t>(c1 - c0) * px});
                return;
            }
            for (std::int64_t c = c0; c < c1; ++c) {
                regions.push_back({.srcOffset = at(from_r, edge_source_index(c, image_cols, a.edge)),
                                   .dstOffset = at(r, c),
                                   .size = px});
            }
        };
        outside_run(a.left, std::min(col_lo, a.left + cols));
        outside_run(std::max(col_hi, a.left), a.left + cols);
    }
    if (regions.empty()) return;
    const BufferView buffer = args.buffer;
    const std::uint64_t zero_bytes = zero ? a.cols * px : 0;
    q.enqueue_batched([&q, buffer, regions = std::move(regions), zero_bytes]() mutable {
        VkBuffer target = q.buffer_of(buffer);
        if (zero_bytes > 0) {
            auto s = std::make_shared<Block>(q.vulkan_device().staging().allocate(
                {.bytes = zero_bytes, .kind = MemoryKind::HostPinned, .tag = "vulkan.staging"}));
            std::memset(s->host(), 0, static_cast<std::size_t>(zero_bytes));
            for (VkBufferCopy& r : regions) r.srcOffset = s->raw().offset;
            vkCmdCopyBuffer(q.commands(), q.vulkan_device().buffer_of(s->raw()), target,
                            static_cast<std::uint32_t>(regions.size()), regions.data());
            q.keep(std::move(s));
            return;
        }
        vkCmdCopyBuffer(q.commands(), target, target, static_cast<std::uint32_t>(regions.size()),
                        regions.data());
    });
}

}  // namespace outcore::vulkan
