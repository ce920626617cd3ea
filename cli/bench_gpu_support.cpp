#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "bench_gpu.hpp"
#include "outcore/core/error.hpp"
#include "outcore/core/size.hpp"
#include "outcore/device/queue.hpp"
#include "outcore/io/npy.hpp"
#include "outcore/monitor/trace.hpp"

namespace outcore::cli::gpu_bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kComponent = "bench";

/// Runs body(begin, end) over [0, count) split across the cores.
void parallel_for(std::uint64_t count, const std::function<void(std::uint64_t, std::uint64_t)>& body) {
    const std::uint64_t threads = std::clamp<std::uint64_t>(std::thread::hardware_concurrency(), 1, 64);
    const std::uint64_t per = (count + threads - 1) / threads;
    std::vector<std::thread> pool;
    for (std::uint64_t t = 0; t < threads; ++t) {
        const std::uint64_t begin = t * per;
        const std::uint64_t end = std::min(count, begin + per);
        if (begin >= end) break;
        pool.emplace_back([&body, begin, end] { body(begin, end); });
    }
    for (auto& th : pool) th.join();
}

[[noreturn]] void throw_io(const std::string& path, const char* op) {
    const int e = errno;
    throw IoError(kComponent, fmt::format("{} '{}': {}", op, path, std::strerror(e)), e, path, op);
}

}  // namespace

PinnedArray::PinnedArray(Device& device, std::uint64_t bytes, const char* tag)
    : block_(device.allocate({.bytes = bytes, .kind = MemoryKind::HostPinned, .tag = tag})) {}

double Timing::median() const {
    if (seconds.empty()) return 0;
    std::vector<double> s = seconds;
    std::sort(s.begin(), s.end());
    return s.size() % 2 == 1 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]);
}
double Timing::min() const { return seconds.empty() ? 0 : *std::min_element(seconds.begin(), seconds.end()); }
double Timing::max() const { return seconds.empty() ? 0 : *std::max_element(seconds.begin(), seconds.end()); }

nlohmann::json Timing::to_json() const {
    return {{"seconds", seconds}, {"median_s", median()}, {"min_s", min()}, {"max_s", max()}};
}

TracedTiming time_reps_traced(int warmup, int reps, const std::function<void()>& body) {
    if (monitor::tracing()) {
        throw UsageError(kComponent, "the traced GEMM run records its own trace: unset OUTCORE_TRACE");
    }
    std::string pattern = (std::filesystem::temp_directory_path() / "outcore-bench-trace-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw_io(pattern, "mkdtemp");
    struct Folder {
        std::filesystem::path path;
        ~Folder() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }
    } folder{pattern};
    const std::filesystem::path file = folder.path / "gemm.trace.json";
    TracedTiming out;
    monitor::start_trace(file);
    try {
        out.timing = time_reps(warmup, reps, body);
    } catch (...) {
        try {
            (void)monitor::stop_trace();
        } catch (...) {
            // the run's own error is the one to report
        }
        throw;
    }
    out.events = monitor::stop_trace();
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(file, ec);
    out.file_bytes = ec ? 0 : static_cast<std::uint64_t>(size);
    return out;
}

Timing time_reps(int warmup, int reps, const std::function<void()>& body) {
    for (int i = 0; i < warmup; ++i) body();
    Timing t;
    for (int i = 0; i < reps; ++i) {
        const auto start = Clock::now();
        body();
        t.seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    return t;
}

Timing in_core_gemm(Device& dev, DType type, GemmCompute compute, const void* a, const void* b, void* c,
                    std::uint64_t n, int warmup, int reps) {
    const std::uint64_t nn = n * n;
    const std::uint64_t w = dtype_bytes(type);
    const std::uint64_t wc = dtype_bytes(gemm_c_dtype(type));
    Block da = dev.allocate({.bytes = nn * w, .kind = MemoryKind::Device, .tag = "bench.in_core"});
    Block db = dev.allocate({.bytes = nn * w, .kind = MemoryKind::Device, .tag = "bench.in_core"});
    Block dc = dev.allocate({.bytes = nn * wc, .kind = MemoryKind::Device, .tag = "bench.in_core"});
    auto q = dev.create_queue(QueueRole::Compute);
    q->upload(a, BufferView(da));
    q->upload(b, BufferView(db));
    q->synchronize();
    const GemmTileArgs args{.type = type,
                            .compute = compute,
                            .m = n,
                            .n = n,
                            .k = n,
                            .a = BufferView(da),
                            .lda = n,
                            .b = BufferView(db),
                            .ldb = n,
                            .c = BufferView(dc),
                            .ldc = n,
                            .alpha = 1.0,
                            .beta = 0.0};
    const Timing t = time_reps(warmup, reps, [&] {
        dev.kernels().gemm(*q, args);
        q->synchronize();
    });
    if (c != nullptr) {
        q->download(BufferView(dc), c);
        q->synchronize();
    }
    return t;
}

nlohmann::json BesideCopies::to_json() const {
    return {{"gemms_alone_s", alone},
            {"beside_download_s", download},
            {"beside_upload_s", upload},
            {"beside_both_s", both},
            {"download_alone_s", copy_alone},
            {"beside_download_to_host_cached_s", download_cached},
            {"download_to_host_cached_alone_s", copy_cached_alone}};
}

BesideCopies gemm_beside_copies(Device& dev, std::uint64_t m, std::uint64_t n, std::uint64_t k, int gemms,
                                std::uint64_t copy_bytes, int reps) {
    constexpr std::uint64_t w = 4;
    Block da = dev.allocate({.bytes = m * k * w, .kind = MemoryKind::Device, .tag = "bench.beside.a"});
    Block db = dev.allocate({.bytes = k * n * w, .kind = MemoryKind::Device, .tag = "bench.beside.b"});
    Block dc = dev.allocate({.bytes = m * n * w, .kind = MemoryKind::Device, .tag = "bench.beside.c"});
    Block dx =
        dev.allocate({.bytes = 2 * copy_bytes, .kind = MemoryKind::Device, .tag = "bench.beside.copy"});
    PinnedArray host(dev, 2 * copy_bytes, "bench.beside.host");
    Block cached =
        dev.allocate({.bytes = copy_bytes, .kind = MemoryKind::HostCached, .tag = "bench.beside.cached"});
    auto compute = dev.create_queue(QueueRole::Compute);
    auto up = dev.create_queue(QueueRole::Upload);
    auto down = dev.create_queue(QueueRole::Download);
    {  // random A and B (zeros would run at a power draw real data does not)
        PinnedArray values(dev, std::max(m * k, k * n) * w, "bench.beside.values");
        fill_random(values.floats(), values.bytes() / w, 3);
        compute->upload(values.data(), BufferView(da));
        compute->upload(values.data(), BufferView(db));
        compute->fill(BufferView(dc), std::byte{0});
        compute->synchronize();
    }
    const GemmTileArgs args{.type = DType::F32,
                            .m = m,
                            .n = n,
                            .k = k,
                            .a = BufferView(da),
                            .lda = m,
                            .b = BufferView(db),
                            .ldb = k,
                            .c = BufferView(dc),
                            .ldc = m,
                            .alpha = 1.0,
                            .beta = 1.0};
    const BufferView down_src(dx, 0, copy_bytes);
    const BufferView up_dst(dx, copy_bytes, copy_bytes);
    auto run = [&](bool with_down, bool with_up, bool with_gemms, bool to_cached = false) {
        return time_reps(1, reps,
                         [&] {
                             if (with_down) down->download(down_src, to_cached ? cached.host() : host.data());
                             if (with_up) up->upload(host.data() + copy_bytes, up_dst);
                             if (with_gemms)
                                 for (int i = 0; i < gemms; ++i) dev.kernels().gemm(*compute, args);
                             compute->synchronize();
                             down->synchronize();
                             up->synchronize();
                         })
            .median();
    };
    BesideCopies r;
    r.alone = run(false, false, true);
    r.download = run(true, false, true);
    r.upload = run(false, true, true);
    r.both = run(true, true, true);
    r.copy_alone = run(true, false, false);
    r.download_cached = run(true, false, true, true);
    r.copy_cached_alone = run(true, false, false, true);
    return r;
}

void fill_random(float* data, std::uint64_t count, std::uint64_t seed) {
    constexpr std::uint64_t kBlock = 1 << 20;
    parallel_for((count + kBlock - 1) / kBlock, [&](std::uint64_t b0, std::uint64_t b1) {
        for (std::uint64_t b = b0; b < b1; ++b) {
            std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + b);
            std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
            const std::uint64_t end = std::min(count, (b + 1) * kBlock);
            for (std::uint64_t i = b * kBlock; i < end; ++i) data[i] = dist(rng);
        }
    });
}

void to_bf16(const float* src, std::uint16_t* dst, std::uint64_t count) {
    parallel_for(count, [&](std::uint64_t i0, std::uint64_t i1) {
        for (std::uint64_t i = i0; i < i1; ++i) dst[i] = f32_to_bf16(src[i]);
    });
}

float bf16_to_float(std::uint16_t v) noexcept { return bf16_to_f32(v); }

double gemm_sample_error(const std::byte* a, const std::byte* b, const float* c, std::uint64_t n, DType type,
                         int samples, std::uint64_t seed) {
    return gemm_sample_error(a, b, reinterpret_cast<const std::byte*>(c), DType::F32, n, type, samples, seed);
}

double gemm_sample_error(const std::byte* a, const std::byte* b, const std::byte* c, DType c_type,
                         std::uint64_t n, DType type, int samples, std::uint64_t seed) {
    auto value = [](DType t, const std::byte* base, std::uint64_t index) -> double {
        if (t == DType::BF16) {
            std::uint16_t v = 0;
            std::memcpy(&v, base + index * 2, 2);
            return bf16_to_float(v);
        }
        float v = 0;
        std::memcpy(&v, base + index * 4, 4);
        return v;
    };
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::uint64_t> pick(0, n - 1);
    double worst = 0;
    for (int s = 0; s < samples; ++s) {
        const std::uint64_t i = pick(rng);
        const std::uint64_t j = pick(rng);
        double ref = 0;
        double scale = 0;
        for (std::uint64_t l = 0; l < n; ++l) {
            const double p = value(type, a, i + l * n) * value(type, b, l + j * n);
            ref += p;
            scale += std::fabs(p);
        }
        const double got = value(c_type, c, i + j * n);
        const double err = std::isfinite(got) ? std::fabs(got - ref) / std::max(scale, 1e-30) : INFINITY;
        worst = std::max(worst, err);
    }
    return worst;
}

ForcedTiles parse_forced_tiles(const std::string& text, const std::string& option) {
    const auto bad = [&] {
        return UsageError(
            "bench",
            fmt::format(
                "--explore '{}': expected [TYPE:]SCHEDULE:MxNxK[:gGROUP][:cSLOTS][:dDEPTH]"
                "[:lLANES][:kCHUNK][:rRETAINED][:oOUTER][:paced|:whole] (schedule square-c, a-panel or "
                "b-panel; sizes, group and C slots positive integers; A panel chunk 0 for a "
                "whole panel or its columns; retained B chunks 0 for none; chunks the retained "
                "group computes k outer positive; depth 2 or 3; lanes 1 or 2)",
                option));
    };
    const std::size_t colon = text.find(':');
    if (colon == std::string::npos) throw bad();
    ForcedTiles f;
    bool known = false;
    for (const tile::GemmSchedule s : {tile::GemmSchedule::SquareC, tile::GemmSchedule::APanelResident,
                                       tile::GemmSchedule::BPanelResident}) {
        if (tile::to_string(s) == text.substr(0, colon)) f.schedule = s, known = true;
    }
    if (!known) throw bad();
    // Digits only, each number positive and in range, separated exactly as shown.
    const char* at = text.data() + colon + 1;
    const char* const end = text.data() + text.size();
    auto number = [&](auto& out, char then) {
        const auto [next, ec] = std::from_chars(at, end, out);
        if (ec != std::errc{} || next == at || out == 0 || (then != '\0' && (next == end || *next != then)))
            throw bad();
        at = then != '\0' ? next + 1 : next;
    };
    number(f.m, 'x');
    number(f.n, 'x');
    number(f.k, '\0');
    // Then ":gGROUP", ":cSLOTS", ":dDEPTH", ":lLANES", ":kCHUNK" and ":rRETAINED", each at
    // most once, in that order: `tag` and digits up to the next ':' or the end (0 refused
    // unless `zero_ok`). True where the suffix was there.
    auto suffix = [&](char tag, auto& out, bool zero_ok) {
        if (end - at < 3 || at[0] != ':' || at[1] != tag) return false;
        at += 2;
        const auto [next, ec] = std::from_chars(at, end, out);
        if (ec != std::errc{} || next == at || (out == 0 && !zero_ok) || (next != end && *next != ':'))
            throw bad();
        at = next;
        return true;
    };
    suffix('g', f.group, false);
    suffix('c', f.c_slots, false);
    suffix('d', f.depth, false);
    suffix('l', f.lanes, false);
    // ":kCHUNK": the A panel in chunks of CHUNK columns (0: whole); ":rRETAINED": rows in a
    // serpentine keeping that many B chunks (0: none).
    std::uint64_t chunk = 0;
    if (suffix('k', chunk, true)) f.panel_chunk_k = chunk;
    std::uint32_t kept = 0;
    if (suffix('r', kept, true)) f.retained_b = kept;
    // ":oOUTER": of a new panel's chunks, OUTER computed k outer by the retained group.
    std::uint32_t outer = 0;
    if (suffix('o', outer, false)) f.retained_k_outer = outer;
    // Then ":paced" or ":whole": C downloads paced over the next tile's GEMMs, or not.
    for (const auto& [word, paced] : {std::pair{std::string_view(":paced"), true}, {":whole", false}}) {
        if (std::string_view(at, static_cast<std::size_t>(end - at)) == word) f.paced = paced, at = end;
    }
    if (at != end || (f.depth != 0 && f.depth != 2 && f.depth != 3) || f.lanes > 2) throw bad();
    return f;
}

std::string describe_panel_chunks(const tile::GemmPlan& plan) {
    if (plan.a_chunk_k == 0) return {};
    return fmt::format(", A panel in chunks of {} ({} ahead{})", plan.a_chunk_k, plan.prefetch_chunks,
                       plan.retained_b == 0
                           ? std::string()
                           : fmt::format(", {} B retained, {} k outer", plan.retained_b,
                                         plan.retained_k_outer == 0 ? plan.a_slots : plan.retained_k_outer));
}

std::pair<std::uint64_t, std::uint64_t> parse_tile_shape(const std::string& text) {
    std::uint64_t rows = 0, cols = 0;
    const char* const end = text.data() + text.size();
    const auto [x, ec_rows] = std::from_chars(text.data(), end, rows);
    const bool ok_rows = ec_rows == std::errc{} && x != text.data() && rows != 0 && x != end && *x == 'x';
    const auto [last, ec_cols] = ok_rows ? std::from_chars(x + 1, end, cols) : std::from_chars_result{x, {}};
    if (!ok_rows || ec_cols != std::errc{} || last != end || last == x + 1 || cols == 0) {
        throw UsageError("bench", fmt::format("--blur-tiles '{}': expected ROWSxCOLS, both positive", text));
    }
    return {rows, cols};
}

void run_traced(const std::string& path, const std::function<void()>& run) {
    if (path.empty() || monitor::tracing()) {
        run();
        return;
    }
    const std::filesystem::path file(path);
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
    monitor::start_trace(file);
    try {
        run();
    } catch (...) {
        (void)monitor::stop_trace();
        throw;
    }
    (void)monitor::stop_trace();
}

void drop_page_cache(const std::string& path) noexcept {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)::fdatasync(fd);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    (void)::close(fd);
}

double disk_read_bandwidth(const std::string& path, unsigned streams) {
    drop_page_cache(path);
    struct Fd {
        int fd;
        explicit Fd(int f) : fd(f) {}
        Fd(const Fd&) = delete;
        Fd& operator=(const Fd&) = delete;
        ~Fd() {
            if (fd >= 0) (void)::close(fd);
        }
    } file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (file.fd < 0) throw_io(path, "open");
    struct stat st {};
    if (::fstat(file.fd, &st) != 0) throw_io(path, "fstat");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    streams = std::max(streams, 1U);
    constexpr std::uint64_t kPiece = 8 << 20;
    std::vector<std::unique_ptr<std::byte[]>> buffers;
    for (unsigned i = 0; i < streams; ++i) buffers.emplace_back(new std::byte[kPiece]);
    // Stream i reads [i·size/streams, (i+1)·size/streams) onward, kPiece at a time. A
    // failure ends every stream; its errno is kept (0: the file ended early).
    std::atomic<bool> failed{false};
    std::atomic<int> error{0};
    auto read_span = [&](std::byte* buffer, std::uint64_t begin, std::uint64_t end) {
        for (std::uint64_t at = begin; at < end && !failed.load();) {
            const ssize_t got = ::pread(file.fd, buffer, static_cast<std::size_t>(std::min(kPiece, end - at)),
                                        static_cast<off_t>(at));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                int expected = 0;
                (void)error.compare_exchange_strong(expected, got < 0 ? errno : 0);
                failed = true;
                return;
            }
            at += static_cast<std::uint64_t>(got);
        }
    };
    const auto start = Clock::now();
    {
        std::vector<std::jthread> threads;
        threads.reserve(streams);
        try {
            for (unsigned i = 0; i < streams; ++i) {
                threads.emplace_back(read_span, buffers[i].get(), size * i / streams,
                                     size * (i + 1) / streams);
            }
        } catch (...) {
            failed = true;  // the streams already running stop; their threads join here
            throw;
        }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (failed) {
        if (error.load() == 0) {
            throw IoError(kComponent,
                          fmt::format("pread '{}': the file ended before its {} bytes were read", path, size),
                          0, path, "pread");
        }
        errno = error.load();
        throw_io(path, "pread");
    }
    return seconds > 0 ? static_cast<double>(size) / seconds : 0;
}

void write_npy_f32(const std::string& path, const float* data, std::uint64_t n) {
    const std::vector<std::uint64_t> shape{n, n};
    const std::vector<std::byte> header = io::format_npy_header(shape, DType::F32, io::NpyOrder::Fortran);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) throw_io(path, "open");
    auto put = [&](const void* p, std::uint64_t bytes, std::uint64_t offset) {
        std::uint64_t done = 0;
        while (done < bytes) {
            const std::size_t piece =
                static_cast<std::size_t>(std::min<std::uint64_t>(bytes - done, 64 << 20));
            const ssize_t w = ::pwrite(fd, static_cast<const std::byte*>(p) + done, piece,
                                       static_cast<off_t>(offset + done));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                (void)::close(fd);
                throw_io(path, "pwrite");
            }
            done += static_cast<std::uint64_t>(w);
        }
    };
    put(header.data(), header.size(), 0);
    put(data, n * n * 4, header.size());
    if (::fsync(fd) != 0) {
        (void)::close(fd);
        throw_io(path, "fsync");
    }
    (void)::close(fd);
}

}  // namespace outcore::cli::gpu_bench
