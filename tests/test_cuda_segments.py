"""The index arithmetic of the CUDA backward's segmented slice reduction, run on the host.

``kernels/cuda/slice_segments.cuh`` (plain C++ with host/device qualifiers) is compiled here with
the host compiler into a small program that replays the two kernels' loops (one "block" per chunk
of a slice's items summing into a scratch row, then one per slice adding its chunks) and checks
that every item is summed exactly once into its own slice, for skewed digit distributions (a few
hot slices, empty slices, one slice, fewer items than slices). No GPU is needed; the kernels
themselves are compile-checked by test_cuda_build.py and compared with the reference on a GPU by
test_ops.py.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = r"""
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>
#include "slice_segments.cuh"

using ttgnn::SliceChunk;

int main(int argc, char** argv) {
  const int64_t items = std::atoll(argv[1]), slices = std::atoll(argv[2]), chunk = std::atoll(argv[3]);
  const int64_t hot = std::atoll(argv[4]);  // this many slices get ~90% of the items
  uint64_t state = std::strtoull(argv[5], nullptr, 10) * 6364136223846793005ULL + 1442695040888963407ULL;
  auto next = [&]() { state = state * 6364136223846793005ULL + 1442695040888963407ULL; return state >> 33; };
  std::vector<int64_t> digit(items);
  for (auto& d : digit) d = (hot > 0 && next() % 10 != 0) ? (int64_t)(next() % hot) * 3 % slices
                                                          : (int64_t)(next() % slices);
  // host side of segment_by_slice: stable sort by digit, counts, offsets
  std::vector<int64_t> order(items);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return digit[a] < digit[b]; });
  std::vector<int64_t> counts(slices, 0), seg(slices + 1, 0), chunks(slices + 1, 0);
  for (auto d : digit) counts[d]++;
  for (int64_t s = 0; s < slices; ++s) {
    seg[s + 1] = seg[s] + counts[s];
    chunks[s + 1] = chunks[s] + (counts[s] + chunk - 1) / chunk;
  }
  const int64_t max_chunks = (items + chunk - 1) / chunk + slices;
  if (chunks[slices] > max_chunks) { std::printf("max_chunks bound broken\n"); return 1; }
  // chunk kernel: each chunk sums its items' values (value of item c: c + 1) into a scratch row
  std::vector<double> scratch(max_chunks, -1.0);
  std::vector<int> visits(items, 0);
  for (int64_t ch = 0; ch < chunks[slices]; ++ch) {
    const SliceChunk part = ttgnn::slice_chunk(seg.data(), chunks.data(), slices, chunk, ch);
    if (part.stop - part.first < 1 || part.stop - part.first > chunk) { std::printf("bad chunk %lld\n", (long long)ch); return 1; }
    double acc = 0;
    for (int64_t i = part.first; i < part.stop; ++i) {
      const int64_t c = order[i];
      if (digit[c] != part.slice) { std::printf("item %lld in slice %lld\n", (long long)c, (long long)part.slice); return 1; }
      visits[c]++;
      acc += double(c + 1);
    }
    scratch[ch] = acc;
  }
  for (int64_t c = 0; c < items; ++c) if (visits[c] != 1) { std::printf("item %lld visited %d times\n", (long long)c, visits[c]); return 1; }
  // reduce kernel against a direct sum per slice
  std::vector<double> want(slices, 0.0);
  for (int64_t c = 0; c < items; ++c) want[digit[c]] += double(c + 1);
  for (int64_t s = 0; s < slices; ++s) {
    double acc = 0;
    for (int64_t ch = chunks[s]; ch < chunks[s + 1]; ++ch) acc += scratch[ch];
    if (acc != want[s]) { std::printf("slice %lld: %f != %f\n", (long long)s, acc, want[s]); return 1; }
  }
  // find_segment on the item offsets: every position maps to its own non-empty slice
  for (int64_t i = 0; i < items; ++i) {
    const int64_t s = ttgnn::find_segment(seg.data(), slices, i);
    if (!(seg[s] <= i && i < seg[s + 1])) { std::printf("find_segment(%lld) = %lld\n", (long long)i, (long long)s); return 1; }
  }
  std::printf("ok %lld chunks\n", (long long)chunks[slices]);
  return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    folder = tmp_path_factory.mktemp("segments")
    (folder / "main.cpp").write_text(PROGRAM)
    exe = folder / "segments"
    result = subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", f"-I{ROOT / 'kernels' / 'cuda'}",
                             str(folder / "main.cpp"), "-o", str(exe)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return exe


@pytest.mark.parametrize("items,slices,chunk,hot", [
    (100_000, 55, 32, 3),      # the papers100M shape: a few hot slices take most prefixes
    (3025, 55, 32, 0),         # every slice used about equally
    (10, 56, 32, 0),           # fewer items than slices: empty slices
    (1000, 1, 7, 0),           # one slice, chunks that do not divide the count
    (1, 4, 32, 0),
    (777, 13, 1, 2),           # chunks of one item
])
def test_segmented_reduction_sums_every_item_once_into_its_slice(program, items, slices, chunk, hot):
    for seed in range(3):
        result = subprocess.run([str(program), str(items), str(slices), str(chunk), str(hot), str(seed)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and result.stdout.startswith("ok"), result.stdout
