#include "outcore/tile/rates.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "outcore/core/error.hpp"
#include "outcore/core/log.hpp"
#include "outcore/core/size.hpp"

namespace outcore::tile {

namespace {

using Clock = std::chrono::steady_clock;

// A probe is long enough once one operation takes this long: long enough to swamp
// launch and wake-up costs, short enough that measuring stays well under a second.
constexpr double kProbeSeconds = 10e-3;
constexpr std::uint64_t kMaxGemmSide = 4096;
constexpr std::uint64_t kMinCopyBytes = 4 * kMiB;
constexpr std::uint64_t kMaxCopyBytes = 256 * kMiB;
// One 2-D copy probe (cached_upload_2d_rate): at most this many bytes and runs, so
// probes of short runs stay short too.
constexpr std::uint64_t kShapeCopyBytes = 16 * kMiB;
constexpr std::uint64_t kShapeCopyRows = 4096;
constexpr double kBusyCallSeconds = 1e-3;  // one GEMM call that keeps the device busy during a copy probe
// One sample of a GEMM's rate: calls back to back for at least this long (at most
// kMaxSampleCalls). A real run keeps the device busy for hundreds of milliseconds at the
// clocks it holds under load, which one call of a millisecond or two does not show.
constexpr double kSampleSeconds = 8e-3;
constexpr int kMaxSampleCalls = 16;
// The values fill_probe_values uploads, repeated across the operand by device copies.
constexpr std::uint64_t kPatternBytes = kMiB;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Best-of-3 time of `run` (which enqueues and synchronizes) after one warm-up.
template <typename F>
double best_time(F&& run) {
    run();
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
        const auto t0 = Clock::now();
        run();
        best = std::min(best, seconds_since(t0));
    }
    return best;
}

/// Waits for a queue when it goes out of scope. Declared after the blocks a probe's
/// queued work reads, so a probe that throws mid-flight (a device error) never frees
/// memory a copy or GEMM is still using; on success the queue is idle already.
class Drain {
public:
    explicit Drain(Queue& q) : q_(q) {}
    Drain(const Drain&) = delete;
    Drain& operator=(const Drain&) = delete;
    ~Drain() {
        try {
            q_.synchronize();
        } catch (...) {
            // The probe reports its own failure; here only the wait matters.
        }
    }

private:
    Queue& q_;
};

/// `bytes` of pseudo-random values of `type` in [-1, 1) (random bytes for the integer
/// types), the same every call.
std::vector<std::byte> probe_pattern(DType type, std::uint64_t bytes) {
    std::vector<std::byte> out(bytes);
    std::mt19937 rng(0x0C0FFEE);
    std::uniform_real_distribution<float> u(-1.0F, 1.0F);
    const std::uint32_t size = dtype_bytes(type);
    for (std::uint64_t i = 0; i + size <= bytes; i += size) {
        const float x = u(rng);
        std::uint16_t half = 0;
        switch (type) {
            case DType::F32: std::memcpy(&out[i], &x, 4); break;
            case DType::F64: {
                const double d = x;
                std::memcpy(&out[i], &d, 8);
                break;
            }
            case DType::BF16:
            case DType::F16:
                half = type == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x);
                std::memcpy(&out[i], &half, 2);
                break;
            case DType::U8:
            case DType::U16:
                for (std::uint32_t j = 0; j < size; ++j) out[i + j] = static_cast<std::byte>(rng());
                break;
        }
    }
    return out;
}

/// Device operands of one GEMM of `s` (packed, the given β) holding
/// fill_probe_values's values, with the call's arguments, for the probes that time
/// GEMMs or keep the device busy with them. Throws OutOfMemory when they do not fit.
class GemmOperands {
public:
    GemmOperands(Device& device, Queue& q, const GemmShape& s, double beta)
        : a_(device.allocate(
              {.bytes = s.m * s.k * dtype_bytes(s.type), .kind = MemoryKind::Device, .tag = "rates.a"})),
          b_(device.allocate(
              {.bytes = s.k * s.n * dtype_bytes(s.type), .kind = MemoryKind::Device, .tag = "rates.b"})),
          c_(device.allocate({.bytes = s.m * s.n * dtype_bytes(gemm_c_dtype(s.type)),
                              .kind = MemoryKind::Device,
                              .tag = "rates.c"})),
          drain_(q),
          args_{.type = s.type,
                .compute = s.compute,
                .trans_a = s.trans_a,
                .trans_b = s.trans_b,
                .m = s.m,
                .n = s.n,
                .k = s.k,
                .a = BufferView(a_),
                .lda = s.trans_a ? s.k : s.m,
                .b = BufferView(b_),
                .ldb = s.trans_b ? s.n : s.k,
                .c = BufferView(c_),
                .ldc = s.m,
                .beta = beta} {
        fill_probe_values(q, BufferView(a_), s.type);
        fill_probe_values(q, BufferView(b_), s.type);
        fill_probe_values(q, BufferView(c_), gemm_c_dtype(s.type));
    }

    const GemmTileArgs& args() const noexcept { return args_; }

private:
    Block a_, b_, c_;
    Drain drain_;  // after the blocks: destroyed first
    GemmTileArgs args_;
};

/// Seconds of one GEMM call of `s` (packed operands, the given β) on device memory of
/// its own: after a warm-up call and one timed alone, the best of 3 samples of calls
/// back to back for kSampleSeconds, each sample's time over its calls. Throws
/// OutOfMemory when the operands do not fit.
double time_gemm(Device& device, Queue& q, const GemmShape& s, double beta) {
    const GemmOperands ops(device, q, s, beta);
    auto per_call = [&](int calls) {
        const auto t0 = Clock::now();
        for (int i = 0; i < calls; ++i) device.kernels().gemm(q, ops.args());
        q.synchronize();
        return seconds_since(t0) / calls;
    };
    (void)per_call(1);  // warm-up
    const double one = per_call(1);
    const int calls = one > 0 ? static_cast<int>(std::clamp(std::ceil(kSampleSeconds / one), 1.0,
                                                            static_cast<double>(kMaxSampleCalls)))
                              : 1;
    double best = 1e30;
    for (int i = 0; i < 3; ++i) best = std::min(best, per_call(calls));
    return best;
}

double flops_of(const GemmShape& s) {
    return 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) * static_cast<double>(s.k);
}

/// The square probe: sides doubling from 256 until one call takes kProbeSeconds (at
/// most kMaxGemmSide); a side the device cannot hold keeps the last that fitted.
double measure_gemm(Device& device, Queue& q, DType type, GemmCompute compute) {
    if (!device.kernels().supports_gemm(type, compute)) return 0.0;
    double rate = 0.0;
    for (std::uint64_t n = 256; n <= kMaxGemmSide; n *= 2) {
        try {
            const GemmShape square{.type = type, .compute = compute, .m = n, .n = n, .k = n};
            const double t = time_gemm(device, q, square, 0.0);
            if (t > 0) rate = flops_of(square) / t;
            if (t >= kProbeSeconds) break;
        } catch (const OutOfMemory&) {
            break;  // keep the largest size that fitted
        }
    }
    return rate;
}

/// One call as the out-of-core executor makes it: C accumulated (β = 1).
double measure_shape(Device& device, Queue& q, const GemmShape& s) {
    if (!device.kernels().supports_gemm(s.type, s.compute)) return 0.0;
    const double t = time_gemm(device, q, s, 1.0);
    return t > 0 ? flops_of(s) / t : 0.0;
}

/// 2-D uploads of at most kShapeCopyBytes of `shape` from `host`, each while f32 GEMMs
/// of about a millisecond per call keep the device busy (`f32_flops` > 0): a real run's
/// copies always overlap GEMMs, and on the H200 that slowed 16 KiB runs 64 KiB apart
/// from 48.6 to 30.6 GB/s (BENCHMARKS.md, sixth run). Best of 3 after a warm-up.
double measure_upload_2d(Device& device, Queue& up, Queue& compute, const void* host, const Copy2D& shape,
                         double f32_flops) {
    Copy2D s = shape;
    s.rows = std::clamp<std::uint64_t>(kShapeCopyBytes / s.width_bytes, 1, std::min(s.rows, kShapeCopyRows));
    s.buffer_pitch_bytes = s.width_bytes;
    Block dev =
        device.allocate({.bytes = s.rows * s.width_bytes, .kind = MemoryKind::Device, .tag = "rates.copy"});
    const Drain drain_up(up);
    auto copy = [&] {
        const auto t0 = Clock::now();
        up.upload_2d(host, BufferView(dev), s);
        up.synchronize();
        return seconds_since(t0);
    };
    (void)copy();  // warm-up
    const double alone = copy();
    double best = alone;
    if (f32_flops > 0 && device.kernels().supports_gemm(DType::F32, GemmCompute::Exact)) {
        const auto side = static_cast<std::uint64_t>(std::cbrt(kBusyCallSeconds * f32_flops / 2));
        const std::uint64_t n = std::clamp<std::uint64_t>(side / 64 * 64, 64, kMaxGemmSide);
        const GemmOperands busy(device, compute, {.type = DType::F32, .m = n, .n = n, .k = n}, 0.0);
        const double call = 2.0 * static_cast<double>(n * n * n) / f32_flops;
        // Enough calls to outlast a copy three times slower than it ran alone.
        const auto calls = static_cast<int>(std::clamp(std::ceil(3 * alone / call) + 1, 1.0, 64.0));
        best = 1e30;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < calls; ++j) device.kernels().gemm(compute, busy.args());
            best = std::min(best, copy());
            compute.synchronize();
        }
    }
    return best > 0 ? static_cast<double>(s.rows * s.width_bytes) / best : 0.0;
}

struct LinkRates {
    double up = 0, down = 0, duplex = 0;
};

LinkRates measure_link(Device& device, Queue& up, Queue& down) {
    LinkRates r;
    for (std::uint64_t bytes = kMinCopyBytes; bytes <= kMaxCopyBytes; bytes *= 2) {
        try {
            Block host_up =
                device.allocate({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "rates.host"});
            Block host_down =
                device.allocate({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = "rates.host"});
            Block dev_up =
                device.allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "rates.device"});
            Block dev_down =
                device.allocate({.bytes = bytes, .kind = MemoryKind::Device, .tag = "rates.device"});
            const Drain drain_up(up), drain_down(down);
            up.fill(BufferView(host_up), std::byte{1});
            up.fill(BufferView(dev_down), std::byte{2});
            up.synchronize();
            const double t_up = best_time([&] {
                up.copy(BufferView(host_up), BufferView(dev_up));
                up.synchronize();
            });
            const double t_down = best_time([&] {
                down.copy(BufferView(dev_down), BufferView(host_down));
                down.synchronize();
            });
            const double t_both = best_time([&] {
                up.copy(BufferView(host_up), BufferView(dev_up));
                down.copy(BufferView(dev_down), BufferView(host_down));
                up.synchronize();
                down.synchronize();
            });
            const auto b = static_cast<double>(bytes);
            if (t_up > 0) r.up = b / t_up;
            if (t_down > 0) r.down = b / t_down;
            if (t_both > 0) r.duplex = 2.0 * b / t_both;
            if (std::min(t_up, t_down) >= kProbeSeconds) break;
        } catch (const OutOfMemory&) {
            break;
        }
    }
    return r;
}

}  // namespace

void fill_probe_values(Queue& q, const BufferView& dst, DType type) {
    if (dst.bytes == 0) return;
    const std::uint64_t size = dtype_bytes(type);
    const std::uint64_t first = std::min(dst.bytes, kPatternBytes / size * size);
    const std::vector<std::byte> pattern = probe_pattern(type, first);
    q.upload(pattern.data(), dst.sub(0, first));
    for (std::uint64_t done = first; done < dst.bytes;) {  // doubling copies of what is there
        const std::uint64_t n = std::min(done, dst.bytes - done);
        q.copy(dst.sub(0, n), dst.sub(done, n));
        done += n;
    }
    q.synchronize();  // the pattern is read from this frame
}

double DeviceRates::gemm_flops(DType type, GemmCompute compute) const noexcept {
    if (compute == GemmCompute::FastTF32) return type == DType::F32 ? tf32_flops : 0.0;
    switch (type) {
        case DType::F32: return f32_flops;
        case DType::F64: return f64_flops;
        case DType::BF16: return bf16_flops;
        case DType::F16: return f16_flops;
        default: return 0.0;
    }
}

namespace {

/// The queues the probes run on, and a guard that turns a failed probe into an
/// unknown rate (a kernel the backend lacks at run time, a device error) rather than
/// failing the operation that asked.
class Prober {
public:
    explicit Prober(Device& device)
        : device_(device),
          compute_(device.create_queue(QueueRole::Compute)),
          up_(device.create_queue(QueueRole::Upload)),
          down_(device.create_queue(QueueRole::Download)) {}

    double gemm(DType type, GemmCompute compute) {
        double rate = 0;
        guarded("gemm", [&] { rate = measure_gemm(device_, *compute_, type, compute); });
        return rate;
    }
    double shape(const GemmShape& s) {
        double rate = 0;
        guarded("gemm shape", [&] { rate = measure_shape(device_, *compute_, s); });
        return rate;
    }
    double upload_2d(const void* host, const Copy2D& shape, double f32_flops) {
        double rate = 0;
        guarded("2-D copy",
                [&] { rate = measure_upload_2d(device_, *up_, *compute_, host, shape, f32_flops); });
        return rate;
    }
    LinkRates link() {
        LinkRates r;
        guarded("link", [&] { r = measure_link(device_, *up_, *down_); });
        return r;
    }

private:
    template <typename F>
    void guarded(const char* what, F&& probe) {
        try {
            probe();
        } catch (const Error& e) {
            log::info("rates", "{} probe on {} failed: {}", what, device_.info().id(), e.what());
            for (Queue* q : {compute_.get(), up_.get(), down_.get()}) {
                try {
                    q->synchronize();
                } catch (const Error&) {
                    // The failure was the probe's; the queue is clear again.
                }
            }
        }
    }

    Device& device_;
    std::unique_ptr<Queue> compute_, up_, down_;
};

void set_link(DeviceRates& r, const LinkRates& link) {
    r.upload_bytes_per_second = link.up;
    r.download_bytes_per_second = link.down;
    r.duplex_bytes_per_second = link.duplex;
}

double* gemm_field(DeviceRates& r, DType type, GemmCompute compute) {
    if (compute == GemmCompute::FastTF32) return type == DType::F32 ? &r.tf32_flops : nullptr;
    switch (type) {
        case DType::F32: return &r.f32_flops;
        case DType::F64: return &r.f64_flops;
        case DType::BF16: return &r.bf16_flops;
        case DType::F16: return &r.f16_flops;
        default: return nullptr;
    }
}

}  // namespace

DeviceRates measure_rates(Device& device) {
    Prober probe(device);
    DeviceRates r;
    r.f32_flops = probe.gemm(DType::F32, GemmCompute::Exact);
    r.f64_flops = probe.gemm(DType::F64, GemmCompute::Exact);
    r.tf32_flops = probe.gemm(DType::F32, GemmCompute::FastTF32);
    r.bf16_flops = probe.gemm(DType::BF16, GemmCompute::Exact);
    r.f16_flops = probe.gemm(DType::F16, GemmCompute::Exact);
    set_link(r, probe.link());
    log::info("rates",
              "{}: f32 {:.3g} FLOP/s, f64 {:.3g}, tf32 {:.3g}, bf16 {:.3g}, f16 {:.3g}; up {:.3g} B/s, down "
              "{:.3g}, "
              "both "
              "{:.3g}",
              device.info().id(), r.f32_flops, r.f64_flops, r.tf32_flops, r.bf16_flops, r.f16_flops,
              r.upload_bytes_per_second, r.download_bytes_per_second, r.duplex_bytes_per_second);
    return r;
}

const DeviceRates& cached_rates(Device& device, DType type, GemmCompute compute) {
    struct Entry {
        DeviceRates rates;
        bool link = false;
        std::map<std::pair<DType, GemmCompute>, bool> gemm;
    };
    using Key = std::tuple<std::string, std::uint32_t, std::string>;
    static std::mutex mutex;
    static std::map<Key, std::unique_ptr<Entry>> cache;
    const DeviceInfo& info = device.info();
    const Key key{info.backend, info.index, info.name};
    std::lock_guard lock(mutex);
    std::unique_ptr<Entry>& entry = cache[key];
    if (!entry) entry = std::make_unique<Entry>();
    double* field = gemm_field(entry->rates, type, compute);
    const bool need_gemm = field != nullptr && !entry->gemm[{type, compute}];
    if (need_gemm || !entry->link) {
        Prober probe(device);
        if (need_gemm) {
            *field = probe.gemm(type, compute);
            entry->gemm[{type, compute}] = true;
        }
        if (!entry->link) {
            set_link(entry->rates, probe.link());
            entry->link = true;
        }
        const DeviceRates& r = entry->rates;
        if (field == nullptr) {  // no GEMM of this type: the link alone (cached_link_rates)
            log::info("rates", "{}: up {:.3g} B/s, down {:.3g}, both {:.3g}", info.id(),
                      r.upload_bytes_per_second, r.download_bytes_per_second, r.duplex_bytes_per_second);
        } else {
            log::info("rates", "{}: {}{} GEMM {:.3g} FLOP/s; up {:.3g} B/s, down {:.3g}, both {:.3g}",
                      info.id(), to_string(type), compute == GemmCompute::FastTF32 ? " (tf32)" : "", *field,
                      r.upload_bytes_per_second, r.download_bytes_per_second, r.duplex_bytes_per_second);
        }
    }
    return entry->rates;
}

const DeviceRates& cached_link_rates(Device& device) {
    // U8 has no GEMM rate (gemm_field gives none), so only the link is probed.
    return cached_rates(device, DType::U8);
}

namespace {

// Shape rates per physical device and shape, failures (0) included.
using ShapeKey = std::tuple<std::string, std::uint32_t, std::string, DType, GemmCompute, bool, bool,
                            std::uint64_t, std::uint64_t, std::uint64_t>;
std::mutex shape_mutex;
std::map<ShapeKey, double> shape_cache;

ShapeKey shape_key(const DeviceInfo& info, const GemmShape& s) {
    return {info.backend, info.index, info.name, s.type, s.compute, s.trans_a, s.trans_b, s.m, s.n, s.k};
}

bool cheap_enough(const GemmShape& s, double expected_flops, double max_call_seconds) {
    return s.m != 0 && s.n != 0 && s.k != 0 && expected_flops > 0 &&
           flops_of(s) / expected_flops <= max_call_seconds;
}

void log_shape(const DeviceInfo& info, const GemmShape& s, double rate, double expected_flops) {
    log::info("rates", "{}: {}{} GEMM {}x{}x{}: {:.3g} FLOP/s ({:.2f} of the single rate)", info.id(),
              to_string(s.type), s.compute == GemmCompute::FastTF32 ? " (tf32)" : "", s.m, s.n, s.k, rate,
              rate / expected_flops);
}

}  // namespace

double cached_gemm_shape_flops(Device& device, const GemmShape& shape, double expected_flops,
                               double max_call_seconds) {
    if (!cheap_enough(shape, expected_flops, max_call_seconds)) return 0.0;
    probe_gemm_shapes(device, {shape}, expected_flops, max_call_seconds);  // unless cached
    std::lock_guard lock(shape_mutex);
    const auto it = shape_cache.find(shape_key(device.info(), shape));
    return it != shape_cache.end() ? it->second : 0.0;
}

void probe_gemm_shapes(Device& device, const std::vector<GemmShape>& shapes, double expected_flops,
                       double max_call_seconds) {
    const DeviceInfo& info = device.info();
    std::lock_guard lock(shape_mutex);
    std::vector<GemmShape> todo;
    for (const GemmShape& s : shapes) {
        const bool listed = std::any_of(todo.begin(), todo.end(), [&](const GemmShape& t) {
            return shape_key(info, t) == shape_key(info, s);
        });
        if (!listed && cheap_enough(s, expected_flops, max_call_seconds) &&
            !shape_cache.contains(shape_key(info, s)))
            todo.push_back(s);
    }
    if (todo.empty()) return;
    // Two passes, the second in reverse order; each shape's rate is the mean of its two.
    // A device whose clocks drift while it is probed (it warms up) then favours no shape
    // for its place in the order, and each rate rests on two samples. On an H100 the
    // one-pass probes let the f32 choice flip in one call of several to a plan at 0.957 of
    // in-core against 0.970-0.973 (BENCHMARKS.md, "third session").
    std::vector<double> first(todo.size(), 0.0);
    std::vector<double> second(todo.size(), 0.0);
    try {
        Prober probe(device);
        for (std::size_t i = 0; i < todo.size(); ++i) first[i] = probe.shape(todo[i]);
        for (std::size_t i = todo.size(); i-- > 0;)
            if (first[i] > 0) second[i] = probe.shape(todo[i]);
    } catch (const Error& e) {
        log::info("rates", "gemm shape probes on {} failed: {}", info.id(), e.what());
    }
    for (std::size_t i = 0; i < todo.size(); ++i) {
        const double rate = first[i] > 0 && second[i] > 0 ? 0.5 * (first[i] + second[i]) : first[i];
        log_shape(info, todo[i], rate, expected_flops);
        shape_cache.emplace(shape_key(info, todo[i]), rate);
    }
}

void set_shape_probes(PlanLimits& limits, Device& device, const GemmShape& base) {
    const double expected = limits.compute_flops;
    auto shape = [base](std::uint64_t m, std::uint64_t n, std::uint64_t k) {
        GemmShape s = base;
        s.m = m, s.n = n, s.k = k;
        return s;
    };
    limits.gemm_shape_flops = [&device, shape, expected](std::uint64_t m, std::uint64_t n, std::uint64_t k) {
        return cached_gemm_shape_flops(device, shape(m, n, k), expected);
    };
    limits.gemm_shapes_ahead = [&device, shape,
                                expected](const std::vector<std::array<std::uint64_t, 3>>& wanted) {
        std::vector<GemmShape> shapes;
        for (const auto& [m, n, k] : wanted) shapes.push_back(shape(m, n, k));
        probe_gemm_shapes(device, shapes, expected);
    };
}

double cached_upload_2d_rate(Device& device, const void* host, const Copy2D& shape) {
    if (host == nullptr || shape.width_bytes == 0 || shape.rows == 0) return 0.0;
    if (shape.rows == 1 || shape.host_pitch_bytes == shape.width_bytes) return 0.0;  // one run
    using Key = std::tuple<std::string, std::uint32_t, std::string, std::uint64_t, std::uint64_t>;
    static std::mutex mutex;
    static std::map<Key, double> cache;
    const DeviceInfo& info = device.info();
    const Key key{info.backend, info.index, info.name, shape.width_bytes, shape.host_pitch_bytes};
    std::lock_guard lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
    double rate = 0.0;
    try {
        const double f32_flops = cached_rates(device, DType::F32).f32_flops;  // the GEMMs the copies overlap
        Prober probe(device);
        rate = probe.upload_2d(host, shape, f32_flops);
    } catch (const Error& e) {
        log::info("rates", "2-D copy probe on {} failed: {}", info.id(), e.what());
    }
    log::info("rates", "{}: 2-D upload of {} B runs {} B apart: {:.3g} B/s", info.id(), shape.width_bytes,
              shape.host_pitch_bytes, rate);
    cache.emplace(key, rate);
    return rate;
}

void apply_rates(const DeviceRates& rates, DType type, GemmCompute compute, PlanLimits& limits) noexcept {
    if (const double f = rates.gemm_flops(type, compute); f > 0) limits.compute_flops = f;
    if (rates.upload_bytes_per_second > 0) limits.link_bytes_per_second = rates.upload_bytes_per_second;
    if (rates.download_bytes_per_second > 0)
        limits.link_d2h_bytes_per_second = rates.download_bytes_per_second;
    if (rates.duplex_bytes_per_second > 0)
        limits.link_duplex_bytes_per_second = rates.duplex_bytes_per_second;
}

}  // namespace outcore::tile
