#!/usr/bin/env bash
# Gaussian blur σ = 8 of a large float32 TIFF: `outcore filter` under a 256 MiB budget
# against `vips gaussblur` (libvips, Debian's libvips-tools), same file, same run.
#
#   bench/filter_vs_vips.sh                       # 20000 x 20000, 256MiB, 3 repetitions
#   bench/filter_vs_vips.sh --size 8000 --reps 5 --dir /var/tmp/fb --json out.json
#
# What it does:
#   1. Generates IN: a 20000 x 20000 float32 TIFF of uniform random pixels in [0, 1),
#      tiled 256 x 256, uncompressed (outcore make-image; not timed). Tiled because that
#      is what outcore writes and what large-image pipelines use; both tools read it.
#      The file is kept for the next run (--fresh regenerates it).
#   2. Runs each tool once as a warm-up (page cache), then --reps times, alternating,
#      each under /usr/bin/time (wall seconds, peak RSS). Outputs go to OUT files that
#      are deleted after each run.
#        vips gaussblur IN OUT 8        vips's default: the first argument is σ, as in
#                                       outcore; min-ampl 0.2 truncates the mask where
#                                       it falls below 0.2 of its peak (exp(-x²/2σ²) ≥
#                                       0.2: x ≤ 1.79σ, radius 14, 29 taps per pass), and
#                                       precision "integer" quantises the mask, even
#                                       for float images (results differ by ~2e-3)
#        vips gaussblur IN OUT 8 --min-ampl 0.011 --precision float
#                                       outcore's exact kernel: radius 24 = ceil(3σ)
#                                       (exp(-24²/128) = 0.0111), 49 float taps per pass
#        outcore filter gaussian --sigma 8 IN OUT --budget 256MiB --force --quiet
#   3. Checks that outcore's output and vips's matched-kernel output agree on a centre
#      crop of up to 4096 x 4096 (max |difference|: float rounding only, ~1e-7; not bit
#      for bit, the sums run in another order; edges are handled differently).
#   4. Prints the load average before and after (the machine is shared) and a table,
#      last: median seconds (min–max), time ratio against each vips, peak RSS against
#      the budget + 64 MiB.
#
# Needs vips and /usr/bin/time: installed through `scripts/install-deps --bench` when
# missing. Builds build/release/cli/outcore when missing (or set OUTCORE=path).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

size=20000
budget=256MiB
reps=3
dir="${TMPDIR:-/var/tmp}/outcore-bench-filter"
json=""
fresh=0
check=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --size) size="$2"; shift 2 ;;
        --budget) budget="$2"; shift 2 ;;
        --reps) reps="$2"; shift 2 ;;
        --dir) dir="$2"; shift 2 ;;
        --json) json="$2"; shift 2 ;;
        --fresh) fresh=1; shift ;;
        --no-check) check=0; shift ;;
        -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
        *) echo "filter_vs_vips: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

if ! command -v vips >/dev/null 2>&1 || [[ ! -x /usr/bin/time ]]; then
    "$root/scripts/install-deps" --bench
fi
outcore="${OUTCORE:-$root/build/release/cli/outcore}"
if [[ ! -x "$outcore" ]]; then
    echo "== building outcore (cmake --preset release, target outcore_cli)"
    (cd "$root" && cmake --preset release >/dev/null && cmake --build --preset release --target outcore_cli)
fi

mkdir -p "$dir"
in="$dir/in_${size}.tif"
out="$dir/out.tif"
budget_bytes=$(python3 -c "
import re,sys
m=re.fullmatch(r'(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?', sys.argv[1], re.I)
u=(m.group(2) or 'B').upper().rstrip('B').replace('I','')
print(int(float(m.group(1))*{'':1,'K':1024,'M':1024**2,'G':1024**3,'T':1024**4}[u]))" "$budget")

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM; $(vips --version); outcore: $outcore"
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ $fresh -eq 1 || ! -f "$in" ]]; then
    echo "== generating $in (${size} x ${size} float32, tiled 256 x 256; not timed)"
    "$outcore" make-image "$in" --rows "$size" --cols "$size" --dtype f32 --pattern random --seed 1 --force
fi

# run NAME CMD...: one timed run; appends "seconds rss_kib" to $dir/NAME.times.
run() {
    local name="$1"; shift
    rm -f "$out"
    /usr/bin/time -f "%e %M" -o "$dir/time.tmp" "$@" >/dev/null
    cat "$dir/time.tmp" >>"$dir/$name.times"
    rm -f "$out"
}
vips_default=(vips gaussblur "$in" "$out" 8)
vips_matched=(vips gaussblur "$in" "$out" 8 --min-ampl 0.011 --precision float)
outcore_cmd=("$outcore" filter gaussian --sigma 8 "$in" "$out" --budget "$budget" --force --quiet)

rm -f "$dir"/*.times
echo "== warm-up (one run each, not counted)"
run warmup "${vips_default[@]}"
run warmup "${vips_matched[@]}"
run warmup "${outcore_cmd[@]}"
rm -f "$dir/warmup.times"
for ((i = 1; i <= reps; i++)); do
    echo "== repetition $i of $reps"
    run vips_default "${vips_default[@]}"
    run vips_matched "${vips_matched[@]}"
    run outcore "${outcore_cmd[@]}"
done

max_diff="not checked"
if [[ $check -eq 1 ]]; then
    echo "== checking outcore against vips with outcore's kernel (centre crop)"
    ref="$dir/ref.v"
    mine="$dir/mine.tif"
    vips gaussblur "$in" "$ref" 8 --min-ampl 0.011 --precision float
    "$outcore" filter gaussian --sigma 8 "$in" "$mine" --budget "$budget" --force --quiet
    # A centre crop: away from the edges (edge handling differs) and small enough to
    # keep the temporary files small.
    crop=$(( size - 128 < 4096 ? size - 128 : 4096 ))
    at=$(( (size - crop) / 2 ))
    vips extract_area "$ref" "$dir/a.v" $at $at $crop $crop
    vips extract_area "$mine" "$dir/b.v" $at $at $crop $crop
    vips subtract "$dir/a.v" "$dir/b.v" "$dir/d.v"
    vips abs "$dir/d.v" "$dir/e.v"
    max_diff=$(vips max "$dir/e.v")
    rm -f "$ref" "$mine" "$dir/a.v" "$dir/b.v" "$dir/d.v" "$dir/e.v"
fi
echo "== load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$dir" "$budget_bytes" "$budget" "$size" "$reps" "$max_diff" "$json" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, statistics, sys
d, budget_bytes, budget, size, reps, max_diff, json_path, load = sys.argv[1:]
budget_bytes = int(budget_bytes)
limit_kib = (budget_bytes + 64 * 1024 * 1024) / 1024
rows = {}
for name in ("vips_default", "vips_matched", "outcore"):
    with open(f"{d}/{name}.times") as f:
        runs = [tuple(float(x) for x in line.split()) for line in f if line.strip()]
    secs = [r[0] for r in runs]
    rss = [r[1] for r in runs]
    rows[name] = {"median_seconds": statistics.median(secs), "min_seconds": min(secs), "max_seconds": max(secs),
                  "peak_rss_kib": max(rss), "runs": secs}
label = {"vips_default": "vips gaussblur 8 (min-ampl 0.2: 29 int taps)",
         "vips_matched": "vips gaussblur 8 --min-ampl 0.011 --precision float",
         "outcore": f"outcore filter gaussian --sigma 8 --budget {budget} (49 taps)"}
o = rows["outcore"]["median_seconds"]
print()
print(f"Gaussian blur sigma 8, {size} x {size} float32 TIFF, median of {reps} after a warm-up; load average {load}")
print(f"outcore vs vips with the same kernel, centre crop: max |difference| {max_diff}")
print()
print(f"{'command':<58} {'median s':>9} {'min-max s':>13} {'outcore/this':>12} {'peak RSS':>10}")
for name, r in rows.items():
    spread = f"{r['min_seconds']:.2f}-{r['max_seconds']:.2f}"
    ratio = o / r["median_seconds"]
    print(f"{label[name]:<58} {r['median_seconds']:>9.2f} {spread:>13} {ratio:>12.2f} {r['peak_rss_kib']/1024:>7.0f} MiB")
ok = rows["outcore"]["peak_rss_kib"] <= limit_kib
print(f"outcore peak RSS {rows['outcore']['peak_rss_kib']/1024:.0f} MiB vs budget + 64 MiB = {limit_kib/1024:.0f} MiB: "
      f"{'within' if ok else 'OVER'}")
print(f"outcore time / vips default time: {o / rows['vips_default']['median_seconds']:.2f} "
      f"({'faster' if o < rows['vips_default']['median_seconds'] else 'SLOWER'})")
if json_path:
    with open(json_path, "w") as f:
        json.dump({"size": int(size), "budget_bytes": budget_bytes, "reps": int(reps), "load_average": load,
                   "max_abs_difference_vs_vips_49": max_diff, "rss_limit_kib": limit_kib, "results": rows}, f, indent=2)
EOF
