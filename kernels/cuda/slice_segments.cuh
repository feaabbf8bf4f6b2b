// Work of one level of the TT backward, grouped by the core slice it updates.
//
// The items of a level (unique prefixes) are sorted by their digit t_k, so the items of slice s
// are positions seg_offsets[s] .. seg_offsets[s + 1] of that order. A slice's items are cut into
// chunks of at most chunk_size; chunk_offsets[s] = sum over slices t < s of
// ceil(count_t / chunk_size) numbers the chunks of every slice one after the other. One thread
// block sums one chunk into a scratch row (no atomics), then one block per slice adds its
// chunks' rows in a fixed order and writes each element of the slice gradient once.
//
// Plain C++ with host/device qualifiers under nvcc, so the index arithmetic is also compiled and
// checked on the host (tests/test_cuda_segments.py).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TTGNN_SEG_HD __host__ __device__ __forceinline__
#else
#define TTGNN_SEG_HD inline
#endif

namespace ttgnn {

// The segment s in [0, num_segments) with offsets[s] <= x < offsets[s + 1], for non-decreasing
// offsets (num_segments + 1 of them) and 0 <= x < offsets[num_segments]. Empty segments
// (offsets[s] == offsets[s + 1]) are never returned.
TTGNN_SEG_HD int64_t find_segment(const int64_t* offsets, int64_t num_segments, int64_t x) {
  int64_t lo = 0;             // offsets[lo] <= x
  int64_t hi = num_segments;  // x < offsets[hi]
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= x) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

// The slice of chunk `chunk` and its positions first .. stop in the sorted order.
struct SliceChunk {
  int64_t slice;
  int64_t first;
  int64_t stop;
};

TTGNN_SEG_HD SliceChunk slice_chunk(const int64_t* seg_offsets, const int64_t* chunk_offsets,
                                    int64_t num_slices, int64_t chunk_size, int64_t chunk) {
  SliceChunk out;
  out.slice = find_segment(chunk_offsets, num_slices, chunk);
  out.first = seg_offsets[out.slice] + (chunk - chunk_offsets[out.slice]) * chunk_size;
  const int64_t end = seg_offsets[out.slice + 1];
  out.stop = out.first + chunk_size < end ? out.first + chunk_size : end;
  return out;
}

}  // namespace ttgnn
