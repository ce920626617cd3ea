// outcore/device/queue.hpp — an ordered, asynchronous stream of copies and kernels.
//
//   auto q = device.create_queue(QueueRole::Upload);
//   q->upload(host_src, BufferView(slot));        // returns at once
//   q->copy(BufferView(slot), BufferView(other));  // runs after the upload
//   q->synchronize();                              // waits; rethrows a failure
//
// Work on one queue runs in submission order; work on different queues runs
// concurrently unless ordered with events (Queue::record / Queue::wait). Host memory
// passed to upload/download must stay valid, and must not be written (upload) or read
// (download), until an event recorded after that work has completed or synchronize()
// has returned: a backend may copy it when the work runs on the device.
// A failure inside queued work is kept and rethrown by synchronize() or by an event's
// wait(); later work on that queue is skipped. One thread at a time may submit to a
// queue (queues are cheap: make one per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "outcore/device/block.hpp"

namespace outcore {

class Device;
class Event;

/// A 2-D copy between host memory and a buffer: `rows` runs of `width_bytes`, the
/// runs `host_pitch_bytes` apart on the host and `buffer_pitch_bytes` apart in the
/// buffer (cudaMemcpy2DAsync's shape). A column-major sub-matrix is one: a run per
/// column, the host pitch its leading dimension.
struct Copy2D {
    std::uint64_t width_bytes = 0;
    std::uint64_t rows = 0;
    std::uint64_t host_pitch_bytes = 0;
    std::uint64_t buffer_pitch_bytes = 0;
    /// Bytes the buffer side spans: (rows − 1) · buffer_pitch + width (0 when empty).
    [[nodiscard]] std::uint64_t buffer_span_bytes() const noexcept;
    /// Bytes the host side spans.
    [[nodiscard]] std::uint64_t host_span_bytes() const noexcept;
    /// UsageError (naming `what`) when a run is wider than a pitch or the spans overflow.
    void validate(const char* what) const;
};

/// What a queue is for; backends may map roles to hardware engines (copy engines).
enum class QueueRole : unsigned char { General, Upload, Compute, Download };

class Queue {
public:
    Queue(Device& device, QueueRole role) noexcept : device_(&device), role_(role) {}
    Queue(const Queue&) = delete;
    Queue& operator=(const Queue&) = delete;
    /// Waits for outstanding work; never throws (a pending failure is logged).
    virtual ~Queue() = default;

    [[nodiscard]] Device& device() const noexcept { return *device_; }
    [[nodiscard]] QueueRole role() const noexcept { return role_; }

    /// Copies src to dst (equal sizes, any memory kinds of this device).
    /// Throws UsageError for unequal sizes or overlap within one block.
    void copy(const BufferView& src, const BufferView& dst);
    /// Copies dst.bytes from host memory at `src` (pageable or not) into dst.
    void upload(const void* src, const BufferView& dst);
    /// Copies src into host memory at `dst`.
    void download(const BufferView& src, void* dst);
    /// Uploads the 2-D region `shape` from host memory at `src` into dst (which must
    /// span shape.buffer_span_bytes()), with no packing on the host. From pinned
    /// memory this runs at link speed on a GPU (one DMA). UsageError for a width
    /// above either pitch or a buffer too small.
    void upload_2d(const void* src, const BufferView& dst, const Copy2D& shape);
    /// Downloads the 2-D region `shape` of src into host memory at `dst`.
    void download_2d(const BufferView& src, void* dst, const Copy2D& shape);
    /// Sets every byte of dst to `value`.
    void fill(const BufferView& dst, std::byte value);
    /// `event` completes when all work submitted to this queue so far has.
    void record(Event& event) { do_record(event); }
    /// Work submitted after this starts only once `event`'s last record completed.
    void wait(const Event& event) { do_wait(event); }
    /// Runs `task` on a host thread in queue order (cudaLaunchHostFunc). A throw from
    /// it is the queue's failure. The task must not submit to this queue.
    void host_task(std::function<void()> task);
    /// Blocks until all submitted work has finished; rethrows the first failure.
    void synchronize() { do_synchronize(); }

protected:
    /// Throws UsageError unless `view` lies within its block and belongs to this device.
    void check_view(const BufferView& view, const char* what) const;

    /// The host side of a copy: exactly one of src/dst is set for upload/download.
    struct HostRange {
        const void* src = nullptr;
        void* dst = nullptr;
    };

private:
    /// One copy of `bytes`: exactly one of (src view, host.src) and one of
    /// (dst view, host.dst) is set; views with bytes == 0 mean "host side".
    virtual void do_copy(const BufferView& src, const BufferView& dst, HostRange host,
                         std::uint64_t bytes) = 0;
    /// A checked, non-empty 2-D copy between host memory (exactly one of host.src /
    /// host.dst) and `buffer`. Default: one do_copy per run (correct everywhere;
    /// backends with a native 2-D copy override it).
    virtual void do_copy_2d(const BufferView& buffer, HostRange host, const Copy2D& shape);
    virtual void do_fill(const BufferView& dst, std::byte value) = 0;
    virtual void do_record(Event& event) = 0;
    virtual void do_wait(const Event& event) = 0;
    virtual void do_host_task(std::function<void()> task) = 0;
    virtual void do_synchronize() = 0;

    Device* device_;
    QueueRole role_;
};

}  // namespace outcore
