// hone_rt::bucket<T>: the kernel hone-testapp-serve-rt and hone-testapp-graph keep running. It
// buckets keys as a hash table probes them: `rounds` mixing steps, each reducing the hash modulo
// `buckets` (a power of two in the tests, so a specialized kernel masks instead of dividing). A
// template in a namespace, so its name is mangled; host_bucket is the host's answer.
#pragma once

namespace hone_rt {

template <typename T>
__global__ void bucket(T* out, const T* keys, unsigned n, unsigned buckets, unsigned rounds) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
#if defined(HONE_RT_SM100A_FENCE) && defined(__CUDA_ARCH_FEAT_SM100_ALL)
  // Only in the compute_100a PTX of hone-testapp-serve-rt-sm100a: an instruction sm_90 lacks, so
  // that PTX cannot be retargeted (the compute_90 PTX, which the emulated device runs, has none).
  asm volatile("tcgen05.fence::before_thread_sync;");
#endif
  T h = keys[i], slot = 0;
  for (unsigned r = 0; r < rounds; ++r) {
    h = h * 2654435761u + r;
    h ^= h >> 13;
    slot = (slot + h) % buckets + h / buckets;
  }
  out[i] = slot;
}

// A step of a chain around bucket (hone-testapp-graph --chain): dst[i] = src[i] + add.
template <typename T> __global__ void stage(T* dst, const T* src, unsigned n, T add) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i] + add;
}

unsigned host_bucket(unsigned key, unsigned buckets, unsigned rounds) {
  unsigned h = key, slot = 0;
  for (unsigned r = 0; r < rounds; ++r) {
    h = h * 2654435761u + r;
    h ^= h >> 13;
    slot = (slot + h) % buckets + h / buckets;
  }
  return slot;
}

} // namespace hone_rt
