// gemm_feed.hpp — how the out-of-core GEMM feeds its input operands to the device
// (private to src/ops/gemm.cpp): OperandCut cuts an operand into k-chunks and uploads
// one, PanelFeeder keeps a resident panel's chunks flowing through its ring of slots.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "outcore/device/queue.hpp"
#include "outcore/io/matrix.hpp"
#include "outcore/tile/gemm_plan.hpp"
#include "outcore/tile/pipeline.hpp"

namespace outcore::ops::detail {

/// Parts to fill a packed chunk of `chunk_bytes` in (OperandCut::cut_parts): one per
/// `part_bytes`, at most one per reader thread. A GEMM's fills of one operand run one
/// step at a time (the step's compute waits for them), so a chunk read by one thread
/// leaves the disk at one request in flight and the other readers idle
/// (docs/pipeline.md, "Overlap and back-pressure").
[[nodiscard]] inline std::uint64_t fill_parts(std::uint64_t chunk_bytes, std::uint64_t part_bytes,
                                              std::uint32_t reader_threads) noexcept {
    if (part_bytes == 0) return 1;
    return std::clamp<std::uint64_t>(chunk_bytes / part_bytes, 1, std::max<std::uint32_t>(reader_threads, 1));
}

/// How one input operand is cut into k-chunks. "Outer" is the operand's C dimension:
/// m for A, n for B. A chunk covers outer range [o0, o0 + on) and k range [k0, k0 + kn)
/// and is packed in the operand's stored orientation, so the kernel transposes (or
/// not) exactly as the caller asked and the host never transposes a stored block.
struct OperandCut {
    const io::MatrixSource* source = nullptr;
    /// The stored (logical) matrix has k along its rows: A with trans_a, B without trans_b.
    bool k_rows = false;
    /// Element bytes.
    std::uint64_t w = 0;
    /// Device-readable memory: chunks go up with one 2-D copy, no packing.
    std::optional<io::DirectMatrix> direct = std::nullopt;
    /// Packed chunks are filled in parts (cut_parts), each its own upload, so that several
    /// reader threads fill one chunk at once: runs of part_span stored columns, or of stored
    /// rows where the source keeps its rows contiguous (MatrixSource::row_major), so that
    /// every part reads whole runs of the source. 0: a chunk in one fill.
    std::uint64_t part_span = 0;
    bool part_rows = false;
    /// The parts of the largest chunk: the most one upload is cut into.
    std::uint64_t parts = 1;

    /// Cuts packed chunks of at most `on` × `kn` elements into parts of at least `part_bytes`
    /// (fill_parts), at most `reader_threads`; smaller chunks into parts of the same span.
    /// Returns the largest part's bytes (a staging buffer holds one).
    std::uint64_t cut_parts(std::uint64_t on, std::uint64_t kn, std::uint64_t part_bytes,
                            std::uint32_t reader_threads) {
        const std::uint64_t nr = k_rows ? kn : on;
        const std::uint64_t nc = k_rows ? on : kn;
        part_rows = source->row_major();
        const std::uint64_t along = std::max<std::uint64_t>(part_rows ? nr : nc, 1);
        parts = std::min(fill_parts(nr * nc * w, part_bytes, reader_threads), along);
        part_span = (along + parts - 1) / parts;
        return part_span * (part_rows ? nc : nr) * w;
    }

    /// Leading dimension of a packed chunk, in elements.
    [[nodiscard]] std::uint64_t ld(std::uint64_t on, std::uint64_t kn) const noexcept {
        return k_rows ? kn : on;
    }
    void read(std::uint64_t o0, std::uint64_t k0, std::uint64_t on, std::uint64_t kn, std::byte* dst) const {
        if (k_rows) {
            source->read(k0, o0, kn, on, dst, kn);
        } else {
            source->read(o0, k0, on, kn, dst, on);
        }
    }
    /// Uploads the chunk into `slot` at `offset` bytes, packed (through a staging buffer)
    /// or, for a direct source, straight from its memory. In the slot, the chunk in
    /// stored orientation (an nr × nc column-major block) has leading dimension
    /// `slot_ld` elements (0: nr, packed) — a panel shorter than the ring's regions.
    void upload(tile::Pipeline& p, tile::SlotId slot, std::uint64_t o0, std::uint64_t k0, std::uint64_t on,
                std::uint64_t kn, std::uint64_t offset = 0, std::uint64_t slot_ld = 0) const {
        const std::uint64_t r0 = k_rows ? k0 : o0;
        const std::uint64_t c0 = k_rows ? o0 : k0;
        const std::uint64_t nr = k_rows ? kn : on;
        const std::uint64_t nc = k_rows ? on : kn;
        const std::uint64_t pitch = (slot_ld == 0 ? nr : slot_ld) * w;
        if (direct) {
            p.upload_2d_from(slot, offset, direct->data + (r0 + c0 * direct->ld_elements) * w,
                             Copy2D{.width_bytes = nr * w,
                                    .rows = nc,
                                    .host_pitch_bytes = direct->ld_elements * w,
                                    .buffer_pitch_bytes = pitch});
            return;
        }
        // A part is stored rows [pr0, pr0 + prn) × columns [pc0, pc0 + pcn) of the chunk;
        // stored rows are k where k runs along them, the outer dimension otherwise.
        const OperandCut cut = *this;
        const std::uint64_t along = part_rows ? nr : nc;
        const std::uint64_t per = part_span == 0 ? along : part_span;
        for (std::uint64_t at = 0; at < along; at += per) {
            const std::uint64_t n = std::min(per, along - at);
            const std::uint64_t pr0 = part_rows ? at : 0;
            const std::uint64_t prn = part_rows ? n : nr;
            const std::uint64_t pc0 = part_rows ? 0 : at;
            const std::uint64_t pcn = part_rows ? nc : n;
            const std::uint64_t po0 = o0 + (k_rows ? pc0 : pr0);
            const std::uint64_t pon = k_rows ? pcn : prn;
            const std::uint64_t pk0 = k0 + (k_rows ? pr0 : pc0);
            const std::uint64_t pkn = k_rows ? prn : pcn;
            p.upload(slot, offset + pr0 * w + pc0 * pitch,
                     Copy2D{.width_bytes = prn * w,
                            .rows = pcn,
                            .host_pitch_bytes = prn * w,
                            .buffer_pitch_bytes = pitch},
                     [cut, po0, pk0, pon, pkn](std::span<std::byte> s) {
                         cut.read(po0, pk0, pon, pkn, s.data());
                     });
        }
    }
};

/// Which panel a feeder is on: its index, its outer range and the next one's.
struct PanelCursor {
    std::uint64_t panel = 0;
    bool started = false;
    std::uint64_t o0 = 0, on = 0, next_o0 = 0, next_on = 0;  // next_on 0: no next panel

    /// Moves to the next panel (or the first).
    void advance(std::uint64_t first, std::uint64_t count, std::uint64_t next_first,
                 std::uint64_t next_count) {
        if (started) ++panel;
        started = true;
        o0 = first;
        on = count;
        next_o0 = next_first;
        next_on = next_count;
    }
};

/// A slot not cut into pieces.
inline const std::vector<tile::SlotId> kNoPieces{};

/// Uploads a chunk into a slot cut into k-pieces of `piece_k` (`regions`, the slot's
/// regions; see kFirstChunkPieces in gemm.cpp), or whole where it has none. A k-piece
/// of an on × kn column-major chunk is its columns [r·piece_k, ...): one contiguous
/// region each.
inline void upload_chunk(tile::Pipeline& p, const OperandCut& cut, tile::SlotId slot,
                         const std::vector<tile::SlotId>& regions, std::uint64_t piece_k, std::uint64_t o0,
                         std::uint64_t k0, std::uint64_t on, std::uint64_t kn) {
    if (regions.empty()) {
        cut.upload(p, slot, o0, k0, on, kn);
        return;
    }
    for (std::uint64_t r = 0; r < regions.size() && r * piece_k < kn; ++r) {
        cut.upload(p, regions[r], o0, k0 + r * piece_k, on, std::min(piece_k, kn - r * piece_k));
    }
}

/// Feeds a resident panel through its ring of chunk slots (GemmPlan::a_slots /
/// b_slots = k_chunks + prefetch_chunks): chunk c of panel r lives in slot
/// (r·K + c) mod S. The current panel's chunks are uploaded as its first tile needs
/// them; the next panel's first prefetch_chunks chunks go into the spare slots
/// during the current panel's middle tiles, and the rest follow the last tile, each
/// as soon as the chunk that held its slot has had its last use.
class PanelFeeder {
public:
    PanelFeeder(tile::Pipeline& p, const std::vector<tile::SlotId>& ring, const OperandCut& cut,
                const tile::GemmPlan& plan, std::uint64_t k)
        : p_(p),
          ring_(ring),
          cut_(cut),
          tile_k_(plan.tile_k),
          k_(k),
          k_chunks_(plan.k_chunks()),
          prefetch_(plan.prefetch_chunks) {}

    /// Begins panel `panel_` + 1 (or the first): its outer range, and the next one's
    /// (next_count 0 when there is none).
    void start(std::uint64_t o0, std::uint64_t on, std::uint64_t next_o0, std::uint64_t next_on) {
        at_.advance(o0, on, next_o0, next_on);
        declared_ = declared_next_;
        declared_next_ = 0;
    }

    /// The slot holding chunk `kc` of the current panel, uploading it (and any
    /// earlier chunk not yet up) first.
    tile::SlotId current(std::uint64_t kc) {
        while (declared_ <= kc) {
            upload(at_.panel, declared_, at_.o0, at_.on);
            ++declared_;
        }
        return slot(at_.panel, kc);
    }

    /// Uploads every chunk in `pieces` k-pieces of `piece_k` (the regions made for each
    /// ring slot, indexed by the slot's index; see kFirstChunkPieces).
    void split(const std::vector<std::vector<tile::SlotId>>* pieces, std::uint64_t piece_k) {
        pieces_ = pieces;
        piece_k_ = piece_k;
    }

    /// Called at step `kc` of a non-first tile of the current panel (after its
    /// streamed upload): one spare-slot chunk of the next panel per step, and on
    /// the last tile every chunk whose slot step kc−1 released.
    void prefetch(bool last_tile, std::uint64_t kc) {
        if (at_.next_on == 0) return;
        if (last_tile) {
            // Chunk c's slot was last used by chunk c − P of this panel: free once
            // step c − P has been issued, i.e. c − P ≤ kc − 1.
            while (declared_next_ < k_chunks_ && declared_next_ + 1 <= kc + prefetch_) {
                upload(at_.panel + 1, declared_next_, at_.next_o0, at_.next_on);
                ++declared_next_;
            }
        } else if (declared_next_ < prefetch_) {
            upload(at_.panel + 1, declared_next_, at_.next_o0, at_.next_on);
            ++declared_next_;
        }
    }

    /// Whether prefetch(true, kc) on the current panel's last tile will send the next
    /// panel's first chunk up into the slot step kc − 1 freed (no spare slot holds it).
    [[nodiscard]] bool releases_next_first(std::uint64_t kc) const noexcept {
        return at_.next_on != 0 && declared_next_ == 0 && prefetch_ == 0 && kc >= 1;
    }

private:
    [[nodiscard]] tile::SlotId slot(std::uint64_t panel, std::uint64_t kc) const {
        return ring_[(panel * k_chunks_ + kc) % ring_.size()];
    }
    void upload(std::uint64_t panel, std::uint64_t kc, std::uint64_t o0, std::uint64_t on) {
        const std::uint64_t k0 = kc * tile_k_;
        const std::uint64_t kn = std::min(tile_k_, k_ - k0);
        const tile::SlotId s = slot(panel, kc);
        upload_chunk(p_, cut_, s, pieces_ == nullptr ? kNoPieces : (*pieces_)[s.index], piece_k_, o0, k0, on,
                     kn);
    }

    tile::Pipeline& p_;
    const std::vector<tile::SlotId>& ring_;
    OperandCut cut_;
    std::uint64_t tile_k_, k_, k_chunks_, prefetch_;
    PanelCursor at_;
    std::uint64_t declared_ = 0;       // chunks of the current panel uploaded
    std::uint64_t declared_next_ = 0;  // chunks of the next panel uploaded
    const std::vector<std::vector<tile::SlotId>>* pieces_ = nullptr;
    std::uint64_t piece_k_ = 0;
};

/// A resident A panel in chunks along k (GemmPlan::a_chunk_k): S = K + P regions of one
/// device slot, back to back (K chunks a panel, P spare). Even panels hold regions
/// [0, K), odd ones [P, S), chunk c at the window's start + c, so every panel is one
/// matrix with leading dimension tile_m (a shorter last panel's columns are runs of its
/// rows tile_m apart) and each leaves the next P regions it does not use: the
/// next panel's chunks there (an odd panel's last P, an even panel's first P) go up
/// beside the row's middle tiles in column pieces (prefetch), the others after the row's
/// last tile frees their regions (release). A panel's first tile takes its chunks in the
/// order they can land (order()). Not for a transposed A (its chunks would not join into
/// one matrix).
class ChunkedPanel {
public:
    ChunkedPanel(tile::Pipeline& p, std::vector<tile::SlotId> ring, const OperandCut& cut,
                 const tile::GemmPlan& plan)
        : p_(p),
          ring_(std::move(ring)),
          cut_(cut),
          chunk_k_(plan.a_chunk_k),
          ld_(plan.tile_m),
          chunks_(plan.problem.k / plan.a_chunk_k),
          prefetch_(ring_.size() - chunks_),
          done_(chunks_, 0),
          next_done_(chunks_, 0),
          released_(chunks_, false) {}

    [[nodiscard]] std::uint64_t chunks() const noexcept { return chunks_; }
    [[nodiscard]] std::uint64_t chunk_k() const noexcept { return chunk_k_; }
    /// Columns of the next panel that go up beside the middle tiles.
    [[nodiscard]] std::uint64_t prefetch_columns() const noexcept { return prefetch_ * chunk_k_; }

    /// Begins the next panel (or the first): its rows, and the next one's (next_on 0:
    /// none).
    void start(std::uint64_t o0, std::uint64_t on, std::uint64_t next_o0, std::uint64_t next_on) {
        at_.advance(o0, on, next_o0, next_on);
        done_.swap(next_done_);
        std::fill(next_done_.begin(), next_done_.end(), 0);
        std::fill(released_.begin(), released_.end(), false);
    }
    /// The order in which the current panel's first tile takes its chunks: those up
    /// ahead first, then in the order the previous panel's last tile frees their regions.
    [[nodiscard]] std::vector<std::uint64_t> order() const { return order_of(at_.panel); }
    /// The region of the current panel's chunk c, that chunk up first.
    tile::SlotId current(std::uint64_t c) {
        fill(at_.panel, c, chunk_k_, done_, at_.o0, at_.on);
        return slot(at_.panel, c);
    }
    /// Up to `columns` more columns of the next panel's chunks in regions the current
    /// panel leaves free.
    void prefetch(std::uint64_t columns) {
        if (at_.next_on == 0) return;
        const std::vector<std::uint64_t> next = order_of(at_.panel + 1);
        for (std::uint64_t n = 0; n < prefetch_ && n < next.size(); ++n) {
            const std::uint64_t i = next[n];  // its region is one the current panel leaves free
            if (columns == 0 || occupant(index(at_.panel + 1, i))) break;
            const std::uint64_t before = next_done_[i];
            fill(at_.panel + 1, i, std::min(chunk_k_, before + columns), next_done_, at_.next_o0,
                 at_.next_on);
            columns -= next_done_[i] - before;
        }
    }
    /// The current panel's chunk c has had its last use (its GEMM is issued): the next
    /// panel's chunks go up, in their order, as far as their regions are free.
    void release(std::uint64_t c) {
        released_[c] = true;
        if (at_.next_on == 0) return;
        for (const std::uint64_t i : order_of(at_.panel + 1)) {
            const std::optional<std::uint64_t> held = occupant(index(at_.panel + 1, i));
            if (held && !released_[*held]) break;
            fill(at_.panel + 1, i, chunk_k_, next_done_, at_.next_o0, at_.next_on);
        }
    }
    /// The current panel's regions, chunk 0 first: one contiguous matrix.
    [[nodiscard]] std::vector<tile::SlotId> regions() const {
        std::vector<tile::SlotId> out;
        for (std::uint64_t c = 0; c < chunks_; ++c) out.push_back(slot(at_.panel, c));
        return out;
    }

private:
    [[nodiscard]] std::uint64_t index(std::uint64_t panel, std::uint64_t c) const {
        return (panel % 2 == 1 ? prefetch_ : 0) + c;
    }
    [[nodiscard]] tile::SlotId slot(std::uint64_t panel, std::uint64_t c) const {
        return ring_[index(panel, c)];
    }
    /// The current panel's chunk in region r, if any.
    [[nodiscard]] std::optional<std::uint64_t> occupant(std::uint64_t r) const {
        const std::uint64_t first = index(at_.panel, 0);
        if (r < first || r >= first + chunks_) return std::nullopt;
        return r - first;
    }
    /// An odd panel's last P chunks lie in the regions the even one before it leaves
    /// free, its others in the order that panel's chunks free theirs; an even panel's
    /// first P likewise.
    [[nodiscard]] std::vector<std::uint64_t> order_of(std::uint64_t panel) const {
        std::vector<std::uint64_t> out;
        const std::uint64_t ahead = panel % 2 == 1 && prefetch_ < chunks_ ? prefetch_ : 0;
        for (std::uint64_t c = chunks_ - ahead; c < chunks_; ++c) out.push_back(c);
        for (std::uint64_t c = 0; c < chunks_ - ahead; ++c) out.push_back(c);
        return out;
    }
    // Columns [done[c], upto) of chunk c of `panel` go up, at their place in its region.
    void fill(std::uint64_t panel, std::uint64_t c, std::uint64_t upto, std::vector<std::uint64_t>& done,
              std::uint64_t o0, std::uint64_t on) {
        if (done[c] >= upto) return;
        const std::uint64_t x = done[c];
        cut_.upload(p_, slot(panel, c), o0, c * chunk_k_ + x, on, upto - x, x * ld_ * cut_.w, ld_);
        done[c] = upto;
    }

    tile::Pipeline& p_;
    std::vector<tile::SlotId> ring_;
    OperandCut cut_;
    std::uint64_t chunk_k_;
    std::uint64_t ld_;  // every panel's leading dimension: tile_m, a shorter last panel too
    std::uint64_t chunks_, prefetch_;
    PanelCursor at_;
    std::vector<std::uint64_t> done_;       // columns of each current chunk up
    std::vector<std::uint64_t> next_done_;  // columns of each next chunk up
    std::vector<bool> released_;            // current chunks whose last use is issued
};

}  // namespace outcore::ops::detail
