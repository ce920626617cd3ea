#include "vulkan_kernels.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <vector>

#include "outcore/core/error.hpp"
#include "vulkan_check.hpp"
#include "vulkan_device.hpp"
#include "vulkan_queue.hpp"

namespace outcore::vulkan {

namespace {

/// Push constants of gemm.comp (and gemm_v4.comp), in their declaration order; `Scalar` is float (f32,
/// bf16) or double (f64), at byte 48 either way.
template <typename Scalar>
struct GemmPush {
    std::uint32_t m, n, k;
    std::uint32_t lda, ldb, ldc;
    std::uint32_t a_off, b_off, c_off;
    std::uint32_t trans_a, trans_b;
    std::uint32_t pad;
    Scalar alpha, beta;
};
static_assert(offsetof(GemmPush<double>, alpha) == 48 && sizeof(GemmPush<float>) == 56);

/// Push constants of filter.comp, in its declaration order.
struct FilterPush {
    std::uint32_t op, in_type, out_type, step, radius, out_rows, out_elems;
    std::uint32_t in_off, in_stride, out_off, out_stride, w_off;
};

constexpr std::uint32_t kFilterGroupX = 32;  // local size of filter.comp
constexpr std::uint32_t kFilterGroupY = 8;

std::uint32_t pixel_code(DType t) { return t == DType::U8 ? 0U : t == DType::U16 ? 1U : 2U; }

std::uint32_t op_code(FilterOp op) {
    switch (op) {
        case FilterOp::SeparableRow: return 0;
        case FilterOp::SeparableColumn: return 1;
        case FilterOp::Conv2D: return 2;
        case FilterOp::SobelMagnitude: return 3;
    }
    return 3;
}

/// A view bound as a storage buffer: the binding starts at the view's offset rounded
/// down to the device's alignment; `element` is where the view starts from there.
struct Binding {
    VkDescriptorBufferInfo info{};
    std::uint32_t element = 0;
};

Binding bind(VulkanDevice& device, VkBuffer buffer, const BufferView& view, std::uint64_t element_bytes,
             const char* kernel, const char* name) {
    const DeviceInfo& info = device.info();
    const std::uint64_t align =
        std::max<std::uint64_t>(device.context().limits().minStorageBufferOffsetAlignment, 1);
    const std::uint64_t start = view.native_offset();
    const std::uint64_t base = start / align * align;
    if ((start - base) % element_bytes != 0) {
        throw UsageError(kernel, fmt::format("{} starts at byte {}, not a multiple of its {}-byte elements",
                                             name, start, element_bytes));
    }
    const std::uint64_t range = start + view.bytes - base;
    if (range > info.max_buffer_bytes) {
        throw UsageError(kernel,
                         fmt::format("{} spans {} bytes, above the device's storage-buffer range of {}", name,
                                     range, info.max_buffer_bytes));
    }
    return Binding{.info = {.buffer = buffer, .offset = base, .range = range},
                   .element = static_cast<std::uint32_t>((start - base) / element_bytes)};
}

std::uint32_t u32(std::uint64_t v, const char* kernel, const char* what) {
    if (v > UINT32_MAX) throw UsageError(kernel, fmt::format("{} = {} is above 2^32 - 1", what, v));
    return static_cast<std::uint32_t>(v);
}

}  // namespace

// --- ComputePipeline ----------------------------------------------------------------

ComputePipeline::ComputePipeline(VkDevice device, std::span<const std::uint32_t> spirv, std::uint32_t buffers,
                                 std::uint32_t push_bytes, std::span<const std::uint32_t> specialization)
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
        std::vector<VkSpecializationMapEntry> entries(specialization.size());
        for (std::uint32_t i = 0; i < entries.size(); ++i)
            entries[i] = {.constantID = i, .offset = i * 4U, .size = 4};
        const VkSpecializationInfo spec{.mapEntryCount = static_cast<std::uint32_t>(entries.size()),
                                        .pMapEntries = entries.data(),
                                        .dataSize = specialization.size_bytes(),
                                        .pData = specialization.data()};
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
                      .pSpecializationInfo = specialization.empty() ? nullptr : &spec},
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

// --- dispatch ---------------------------------------------------------------------

namespace {

/// Records one dispatch of `pipe` on `q`'s worker: its storage buffers pushed as
/// descriptors, `push` as push constants; `keep` (may be null) lives until it ran.
void dispatch(VulkanQueue& q, VulkanDevice& device, const ComputePipeline& pipe,
              std::vector<VkDescriptorBufferInfo> infos, std::vector<std::byte> push, std::uint32_t gx,
              std::uint32_t gy, std::shared_ptr<void> keep) {
    auto record = [&q, &device, &pipe, infos = std::move(infos), push = std::move(push), gx, gy,
                   keep = std::move(keep)]() mutable {
        VkCommandBuffer cmd = q.commands();
        std::vector<VkWriteDescriptorSet> writes(infos.size());
        for (std::uint32_t i = 0; i < infos.size(); ++i) {
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
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline());
        device.context().push_descriptor()(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout(), 0,
                                           static_cast<std::uint32_t>(writes.size()), writes.data());
        vkCmdPushConstants(cmd, pipe.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           static_cast<std::uint32_t>(push.size()), push.data());
        vkCmdDispatch(cmd, gx, gy, 1);
        if (keep) q.keep(std::move(keep));
    };
    const std::string_view name = monitor::current_op_name();
    q.enqueue_command(monitor::OpKind::Kernel, name.empty() ? "compute" : name, 0, std::move(record));
}

template <typename T>
std::vector<std::byte> bytes_of(const T& value) {
    std::vector<std::byte> out(sizeof(T));
    std::memcpy(out.data(), &value, sizeof(T));
    return out;
}

}  // namespace

// --- VulkanKernels ------------------------------------------------------------------

namespace {

/// Shared memory of gemm.comp's two staged slices (four padding columns each).
std::uint64_t gemm_shared_bytes(const GemmTile& t, std::uint64_t element_bytes) {
    return 2 * (std::uint64_t{t.workgroup} * t.per_thread + 4) * t.depth * element_bytes;
}

/// The blocking gemm.comp runs: `t`, or where `t` is vectorized (gemm_v4.comp, float32
/// only) 16x4x16 adjacent, gemm.comp's fastest on the H200 (its 8x8 blockings run at a
/// tenth of that there, docs/BENCHMARKS.md), for bf16, f16 and f64.
GemmTile scalar_tile(const GemmTile& t) {
    return t.vectorized ? GemmTile{.workgroup = 16,
                                   .per_thread = 4,
                                   .depth = 16,
                                   .contiguous = true,
                                   .vectorized = false}
                        : t;
}

/// The blocking `t` checked against what the device runs; returns it as the shader's
/// specialization constants (gemm_v4.comp reads only constant 2, the depth).
std::array<std::uint32_t, 4> gemm_specialization(const VulkanDevice& device, const GemmTile& t) {
    const VkPhysicalDeviceLimits& l = device.context().limits();
    if (t.vectorized) {
        // Two stages of both slices, 128 floats a row (a swizzle, no padding).
        const std::uint64_t shared = 2 * 2 * std::uint64_t{t.depth} * 128 * sizeof(float);
        if (t.workgroup != 16 || t.per_thread != 8 || (t.depth != 8 && t.depth != 16) || t.contiguous ||
            l.maxComputeWorkGroupInvocations < 256 || l.maxComputeWorkGroupSize[0] < 16 ||
            l.maxComputeWorkGroupSize[1] < 16 || shared > l.maxComputeSharedMemorySize) {
            throw UsageError(kComponent,
                             fmt::format("the vectorized GEMM shader takes 16x16 threads, 8x8 each, 8 or 16 "
                                         "deep, not adjacent, in {} bytes of shared memory; not {}x{} x "
                                         "{}x{}, {} deep{}",
                                         l.maxComputeSharedMemorySize, t.workgroup, t.workgroup, t.per_thread,
                                         t.per_thread, t.depth, t.contiguous ? ", adjacent" : ""));
        }
        return {t.workgroup, t.per_thread, t.depth, 0U};
    }
    const std::uint64_t threads = std::uint64_t{t.workgroup} * t.workgroup;
    const std::uint64_t block = std::uint64_t{t.workgroup} * t.per_thread;
    const std::uint64_t shared = gemm_shared_bytes(t, sizeof(float));
    if (t.workgroup == 0 || t.per_thread == 0 || t.per_thread > 8 || t.depth == 0 ||
        threads > l.maxComputeWorkGroupInvocations || t.workgroup > l.maxComputeWorkGroupSize[0] ||
        t.workgroup > l.maxComputeWorkGroupSize[1] || (block * t.depth) % threads != 0 ||
        shared > l.maxComputeSharedMemorySize) {
        throw UsageError(
            kComponent,
            fmt::format("GEMM blocking {}x{} threads x {}x{} each, {} deep does not fit the device "
                        "(or {}·{} is not a multiple of {})",
                        t.workgroup, t.workgroup, t.per_thread, t.per_thread, t.depth, block, t.depth,
                        threads));
    }
    return {t.workgroup, t.per_thread, t.depth, t.contiguous ? 1U : 0U};
}

}  // namespace

VulkanKernels::VulkanKernels(VulkanDevice& device, const GemmTile& gemm_tile)
    : device_(device),
      gemm_tile_(gemm_tile),
      gemm_f32_(device.context().device(), gemm_tile.vectorized ? spirv_gemm_v4_f32() : spirv_gemm_f32(), 3,
                sizeof(GemmPush<float>), gemm_specialization(device, gemm_tile)) {
    // f32 is made now (it checks the blocking against the driver too); the rest on
    // first use.
    const std::array<std::uint32_t, 4> spec = gemm_specialization(device, scalar_tile(gemm_tile));
    const VkDevice vk = device.context().device();
    auto gemm = [vk, spec](std::span<const std::uint32_t> (*spirv)(), std::size_t push) {
        return LazyPipeline::Make([vk, spec, spirv, push] {
            return std::make_unique<ComputePipeline>(vk, spirv(), 3, static_cast<std::uint32_t>(push), spec);
        });
    };
    if (device.context().small_storage()) {
        gemm_bf16_.set(gemm(spirv_gemm_bf16, sizeof(GemmPush<float>)));
        gemm_f16_.set(gemm(spirv_gemm_f16, sizeof(GemmPush<float>)));
        // With float64 the Sobel magnitude's sqrt is rounded as the CPU rounds it.
        const bool exact = device.context().float64();
        filter_.set([vk, exact] {
            return std::make_unique<ComputePipeline>(vk, exact ? spirv_filter_exact_sqrt() : spirv_filter(),
                                                     7, static_cast<std::uint32_t>(sizeof(FilterPush)));
        });
    }
    // float64 slices take twice the shared memory: without room, no f64 GEMM.
    if (device.context().float64() && gemm_shared_bytes(scalar_tile(gemm_tile), sizeof(double)) <=
                                          device.context().limits().maxComputeSharedMemorySize) {
        gemm_f64_.set(gemm(spirv_gemm_f64, sizeof(GemmPush<double>)));
    }
}

ComputePipeline& LazyPipeline::get() {
    if (!make_) throw UsageError("vulkan", "a pipeline this device cannot make");
    std::lock_guard lock(mutex_);
    if (!pipeline_) pipeline_ = make_();
    return *pipeline_;
}

// FastTF32 runs exactly in f32 (as on the CPU backend): the shader has no reduced
// precision path. bf16 and f16 where the device has 16-bit storage, f64 where it has
// shaderFloat64.
bool VulkanKernels::do_supports_gemm(DType type, GemmCompute compute) const noexcept {
    switch (type) {
        case DType::F32: return true;
        case DType::BF16: return compute == GemmCompute::Exact && gemm_bf16_.available();
        case DType::F16: return compute == GemmCompute::Exact && gemm_f16_.available();
        case DType::F64: return compute == GemmCompute::Exact && gemm_f64_.available();
        default: return false;
    }
}

void VulkanKernels::do_gemm(Queue& queue, const GemmTileArgs& args) {
    VulkanQueue& q = vulkan_queue(queue, "gemm");
    if (args.m == 0 || args.n == 0) return;
    const VkPhysicalDeviceLimits& limits = device_.context().limits();
    const GemmTile tile = args.type == DType::F32 ? gemm_tile_ : scalar_tile(gemm_tile_);
    const std::uint64_t block = std::uint64_t{tile.workgroup} * tile.per_thread;
    const std::uint64_t groups_m = (args.m + block - 1) / block;
    const std::uint64_t groups_n = (args.n + block - 1) / block;
    if (groups_m > limits.maxComputeWorkGroupCount[0] || groups_n > limits.maxComputeWorkGroupCount[1]) {
        throw UsageError("gemm", fmt::format("a {}x{} tile needs more workgroups than the device dispatches "
                                             "({} x {})",
                                             args.m, args.n, limits.maxComputeWorkGroupCount[0],
                                             limits.maxComputeWorkGroupCount[1]));
    }
    const std::uint64_t in_bytes = dtype_bytes(args.type);
    const std::uint64_t out_bytes = dtype_bytes(gemm_c_dtype(args.type));
    const Binding a = bind(device_, q.buffer_of(args.a), args.a, in_bytes, "gemm", "A");
    const Binding b = bind(device_, q.buffer_of(args.b), args.b, in_bytes, "gemm", "B");
    const Binding c = bind(device_, q.buffer_of(args.c), args.c, out_bytes, "gemm", "C");
    const GemmPush<double> push{.m = u32(args.m, "gemm", "m"),
                                .n = u32(args.n, "gemm", "n"),
                                .k = u32(args.k, "gemm", "k"),
                                .lda = u32(args.lda, "gemm", "lda"),
                                .ldb = u32(args.ldb, "gemm", "ldb"),
                                .ldc = u32(args.ldc, "gemm", "ldc"),
                                .a_off = a.element,
                                .b_off = b.element,
                                .c_off = c.element,
                                .trans_a = args.trans_a ? 1U : 0U,
                                .trans_b = args.trans_b ? 1U : 0U,
                                .pad = 0,
                                .alpha = args.alpha,
                                .beta = args.beta};
    const auto gx = static_cast<std::uint32_t>(groups_m);
    const auto gy = static_cast<std::uint32_t>(groups_n);
    if (args.type == DType::F64) {
        dispatch(q, device_, gemm_f64_.get(), {a.info, b.info, c.info}, bytes_of(push), gx, gy, nullptr);
        return;
    }
    // f32, bf16 and f16 take float scalars: the same fields, alpha and beta narrowed.
    GemmPush<float> narrow{};
    std::memcpy(&narrow, &push, offsetof(GemmPush<float>, alpha));
    narrow.alpha = static_cast<float>(args.alpha);
    narrow.beta = static_cast<float>(args.beta);
    const ComputePipeline& pipeline = args.type == DType::BF16  ? gemm_bf16_.get()
                                      : args.type == DType::F16 ? gemm_f16_.get()
                                                                : gemm_f32_;
    dispatch(q, device_, pipeline, {a.info, b.info, c.info}, bytes_of(narrow), gx, gy, nullptr);
}

void VulkanKernels::do_filter(Queue& queue, const FilterTileArgs& args) {
    VulkanQueue& q = vulkan_queue(queue, "filter");
    if (!filter_.available()) {
        throw UsageError("filter", fmt::format("{} lacks 8- and 16-bit storage buffers, which the filter "
                                               "shader needs",
                                               device_.info().name));
    }
    const std::uint64_t in_elem = dtype_bytes(args.in_type);
    const std::uint64_t out_elem = dtype_bytes(args.out_type);
    if (args.in_row_stride % in_elem != 0 || args.out_row_stride % out_elem != 0) {
        throw UsageError("filter", "row strides must be multiples of the element size");
    }
    const std::uint64_t halo_rows = args.op == FilterOp::SeparableRow ? 0 : args.radius;
    const std::uint64_t halo_cols = args.op == FilterOp::SeparableColumn ? 0 : args.radius;
    const std::uint64_t in_rows = args.out_rows + 2 * halo_rows;
    const std::uint64_t in_span =
        args.in_row_stride * (in_rows - 1) + (args.out_cols + 2 * halo_cols) * args.channels * in_elem;
    const std::uint64_t out_span =
        args.out_row_stride * (args.out_rows - 1) + args.out_cols * args.channels * out_elem;
    // A row written early must not be read later as input.
    if (args.in.block.native == args.out.block.native &&
        args.in.native_offset() < args.out.native_offset() + out_span &&
        args.out.native_offset() < args.in.native_offset() + in_span) {
        throw UsageError("filter", "the input and output tiles overlap");
    }
    const BufferView in = args.in.sub(0, in_span);
    const BufferView out = args.out.sub(0, out_span);
    const Binding bin = bind(device_, q.buffer_of(in), in, in_elem, "filter", "the input");
    const Binding bout = bind(device_, q.buffer_of(out), out, out_elem, "filter", "the output");
    // Weights: a caller's buffer as it is; inline ones (setBytes) copied into staging
    // memory here, as Metal copies setBytes data.
    std::shared_ptr<Block> inline_weights;
    VkDescriptorBufferInfo weights{};
    std::uint32_t w_off = 0;
    const std::size_t taps = args.weights != nullptr ? args.weights->size_bytes() / sizeof(float) : 0;
    if (taps == 0 || args.weights->is_inline()) {
        const std::uint64_t bytes = std::max<std::uint64_t>(taps * sizeof(float), 4);
        inline_weights = std::make_shared<Block>(device_.staging().allocate(
            {.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "vulkan.params"}));
        if (taps > 0)
            std::memcpy(inline_weights->host(), args.weights->inline_bytes().data(), taps * sizeof(float));
        weights = {.buffer = device_.buffer_of(inline_weights->raw()),
                   .offset = inline_weights->raw().offset,
                   .range = bytes};
    } else {
        const BufferView wv = args.weights->buffer().sub(0, taps * sizeof(float));
        const Binding bw = bind(device_, q.buffer_of(wv), wv, sizeof(float), "filter", "the weights");
        weights = bw.info;
        w_off = bw.element;
    }
    const std::uint64_t out_elems = args.out_cols * args.channels;
    const VkPhysicalDeviceLimits& limits = device_.context().limits();
    const std::uint64_t gx = (out_elems + kFilterGroupX - 1) / kFilterGroupX;
    const std::uint64_t gy = (args.out_rows + kFilterGroupY - 1) / kFilterGroupY;
    if (gx > limits.maxComputeWorkGroupCount[0] || gy > limits.maxComputeWorkGroupCount[1]) {
        throw UsageError("filter",
                         fmt::format("a {}x{} tile needs more workgroups than the device dispatches",
                                     args.out_rows, args.out_cols));
    }
    const FilterPush push{.op = op_code(args.op),
                          .in_type = pixel_code(args.in_type),
                          .out_type = pixel_code(args.out_type),
                          .step = args.channels,
                          .radius = args.radius,
                          .out_rows = u32(args.out_rows, "filter", "rows"),
                          .out_elems = u32(out_elems, "filter", "samples per row"),
                          .in_off = bin.element,
                          .in_stride = u32(args.in_row_stride / in_elem, "filter", "the input stride"),
                          .out_off = bout.element,
                          .out_stride = u32(args.out_row_stride / out_elem, "filter", "the output stride"),
                          .w_off = w_off};
    dispatch(q, device_, filter_.get(),
             {bin.info, bin.info, bin.info, bout.info, bout.info, bout.info, weights}, bytes_of(push),
             static_cast<std::uint32_t>(gx), static_cast<std::uint32_t>(gy), std::move(inline_weights));
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
    auto record = [&q, buffer, regions = std::move(regions), zero_bytes]() mutable {
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
    };
    q.enqueue_command(monitor::OpKind::DeviceCopy, "copy", 0, std::move(record));
}

}  // namespace outcore::vulkan
