// vulkan_kernels.hpp — the Vulkan backend's kernels (private to the backend).
//
// GEMM is a compute shader (shaders/gemm.comp, built for f32, bf16, f16 and f64; for f32
// shaders/gemm_v4.comp instead when GemmTile::vectorized); its three matrices are
// bound with push descriptors at offsets rounded down to
// minStorageBufferOffsetAlignment, the rest passed as element offsets in push
// constants, so any 4-byte-aligned view works. The edge fill is one vkCmdCopyBuffer
// whose regions copy each outside pixel (or run) from its source inside the image.
// Filters are shaders/filter.comp: one invocation per output sample, the CPU
// backend's arithmetic (every operation `precise`), u8/u16/f32 pixels through 8- and
// 16-bit storage buffers.
#pragma once

#include <vulkan/vulkan.h>

#include <functional>
#include <memory>
#include <mutex>
#include <span>

#include "outcore/backends/vulkan.hpp"
#include "outcore/device/kernels.hpp"

namespace outcore::vulkan {

class VulkanDevice;

/// SPIR-V of the shaders, embedded at build time (vulkan_shaders.cpp, generated).
std::span<const std::uint32_t> spirv_gemm_f32();
std::span<const std::uint32_t> spirv_gemm_bf16();
std::span<const std::uint32_t> spirv_gemm_f16();
std::span<const std::uint32_t> spirv_gemm_f64();
std::span<const std::uint32_t> spirv_gemm_v4_f32();
std::span<const std::uint32_t> spirv_filter();
std::span<const std::uint32_t> spirv_filter_exact_sqrt();

/// One compute pipeline whose bindings are `buffers` storage buffers (set 0, push
/// descriptors) and whose push constants are `push_bytes`.
class ComputePipeline {
public:
    /// `specialization`: the values of constant_id 0, 1, ... (32-bit each).
    ComputePipeline(VkDevice device, std::span<const std::uint32_t> spirv, std::uint32_t buffers,
                    std::uint32_t push_bytes, std::span<const std::uint32_t> specialization = {});
    ~ComputePipeline();
    ComputePipeline(const ComputePipeline&) = delete;
    ComputePipeline& operator=(const ComputePipeline&) = delete;

    [[nodiscard]] VkPipeline pipeline() const noexcept { return pipeline_; }
    [[nodiscard]] VkPipelineLayout layout() const noexcept { return layout_; }

private:
    VkDevice device_;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkShaderModule module_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
};

/// A pipeline made on first use (driver compiles take seconds on NVIDIA; a device
/// that never runs bf16 need not wait for it). Empty when `make` is. Thread-safe: a
/// mutex, not std::call_once, whose libstdc++ version hangs after a throw (GCC PR 66146).
class LazyPipeline {
public:
    using Make = std::function<std::unique_ptr<ComputePipeline>()>;
    /// How to make it; before the first get() only.
    void set(Make make) { make_ = std::move(make); }
    [[nodiscard]] bool available() const noexcept { return static_cast<bool>(make_); }
    /// Makes it the first time (a failure is thrown and retried on the next call).
    [[nodiscard]] ComputePipeline& get();

private:
    Make make_;
    std::mutex mutex_;
    std::unique_ptr<ComputePipeline> pipeline_;
};

class VulkanKernels final : public Kernels {
public:
    VulkanKernels(VulkanDevice& device, const GemmTile& gemm_tile);

private:
    void do_gemm(Queue& queue, const GemmTileArgs& args) override;
    void do_filter(Queue& queue, const FilterTileArgs& args) override;
    void do_pad_edges(Queue& queue, const PadEdgesArgs& args) override;
    bool do_supports_gemm(DType type, GemmCompute compute) const noexcept override;

    VulkanDevice& device_;
    GemmTile gemm_tile_;
    ComputePipeline gemm_f32_;
    LazyPipeline gemm_bf16_;  ///< unavailable without 16-bit storage
    LazyPipeline gemm_f16_;   ///< unavailable without 16-bit storage
    LazyPipeline gemm_f64_;   ///< unavailable without shaderFloat64
    LazyPipeline filter_;     ///< unavailable without 8/16-bit storage
};

}  // namespace outcore::vulkan
