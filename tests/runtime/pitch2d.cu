// pitch2d: pitched 2D device memory as image code uses it. cudaMallocPitch gives a pitch at
// least the row width (and aligned); cudaMemset2D clears it; cudaMemcpy2D copies a host
// sub-rectangle (with its own pitch) into it at an offset; a kernel walks the rows by the pitch;
// cudaMemcpy2D device-to-device moves a sub-rectangle into a second pitched allocation,
// cudaMemcpy2DAsync brings it back, cudaMemset2D fills a sub-rectangle. A width above a pitch is
// refused with cudaErrorInvalidPitchValue. Every byte is checked against a host model.
#include "corpus.cuh"

#include <cstring>
#include <vector>

__global__ void add_coords(int* base, size_t pitch, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= width || y >= height) return;
  int* row = (int*)((char*)base + y * pitch);
  row[x] += 1000 * y + x;
}

int main() {
  const int w = 45, h = 23; // ints
  int* d = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch((void**)&d, &pitch, w * sizeof(int), h));
  if (pitch < w * sizeof(int) || pitch % 4 != 0) corpus::wrong("pitch %zu for %zu-byte rows", pitch, w * sizeof(int));
  // The model: rows of w ints (the padding is not looked at).
  std::vector<int> model(w * h, 0);
  CHECK(cudaMemset2D(d, pitch, 0, w * sizeof(int), h));

  // A 10x6 host block with a pitch of 16 ints, into columns 3.., rows 5..
  const int bw = 10, bh = 6, hpitch = 16, bx = 3, by = 5;
  std::vector<int> block(hpitch * bh);
  for (int y = 0; y < bh; ++y)
    for (int x = 0; x < hpitch; ++x) block[y * hpitch + x] = x < bw ? 100 * y + x + 1 : -999;
  CHECK(cudaMemcpy2D((char*)d + by * pitch + bx * sizeof(int), pitch, block.data(),
                     hpitch * sizeof(int), bw * sizeof(int), bh, cudaMemcpyHostToDevice));
  for (int y = 0; y < bh; ++y)
    for (int x = 0; x < bw; ++x) model[(by + y) * w + bx + x] = block[y * hpitch + x];

  dim3 threads(16, 8), grid((w + 15) / 16, (h + 7) / 8);
  add_coords<<<grid, threads>>>(d, pitch, w, h);
  CHECK_LAUNCH("add_coords<<<>>>");
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) model[y * w + x] += 1000 * y + x;

  // A second allocation: a 20x8 sub-rectangle from (7, 2) lands at (1, 1); its frame is memset.
  const int w2 = 24, h2 = 12, sw = 20, sh = 8, sx = 7, sy = 2, dx = 1, dy = 1;
  int* d2 = nullptr;
  size_t pitch2 = 0;
  CHECK(cudaMallocPitch((void**)&d2, &pitch2, w2 * sizeof(int), h2));
  CHECK(cudaMemset2D(d2, pitch2, 0x11, w2 * sizeof(int), h2));
  std::vector<int> model2(w2 * h2, 0x11111111);
  CHECK(cudaMemcpy2D((char*)d2 + dy * pitch2 + dx * sizeof(int), pitch2,
                     (char*)d + sy * pitch + sx * sizeof(int), pitch, sw * sizeof(int), sh,
                     cudaMemcpyDeviceToDevice));
  for (int y = 0; y < sh; ++y)
    for (int x = 0; x < sw; ++x) model2[(dy + y) * w2 + dx + x] = model[(sy + y) * w + sx + x];
  // A 3x4 block of 0x7f bytes at (18, 7) in the first allocation.
  CHECK(cudaMemset2D((char*)d + 7 * pitch + 18 * sizeof(int), pitch, 0x7f, 3 * sizeof(int), 4));
  for (int y = 7; y < 11; ++y)
    for (int x = 18; x < 21; ++x) model[y * w + x] = 0x7f7f7f7f;

  // Back to the host: the first with cudaMemcpy2D (host pitch = width), the second async.
  std::vector<int> got(w * h), got2(w2 * h2);
  CHECK(cudaMemcpy2D(got.data(), w * sizeof(int), d, pitch, w * sizeof(int), h, cudaMemcpyDeviceToHost));
  cudaStream_t s;
  CHECK(cudaStreamCreate(&s));
  CHECK(cudaMemcpy2DAsync(got2.data(), w2 * sizeof(int), d2, pitch2, w2 * sizeof(int), h2,
                          cudaMemcpyDeviceToHost, s));
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < w * h; ++i) {
    if (got[i] != model[i]) corpus::wrong("first (%d, %d) = %d, expected %d", i % w, i / w, got[i], model[i]);
  }
  for (int i = 0; i < w2 * h2; ++i) {
    if (got2[i] != model2[i])
      corpus::wrong("second (%d, %d) = %d, expected %d", i % w2, i / w2, got2[i], model2[i]);
  }

  CHECK_ERROR(cudaMemcpy2D(got.data(), 8, d, pitch, 16, 2, cudaMemcpyDeviceToHost),
              cudaErrorInvalidPitchValue);
  CHECK_ERROR(cudaMemset2D(d, pitch, 0, pitch + 4, 1), cudaErrorInvalidPitchValue);

  corpus::Checksum sum;
  sum.add_all(got.data(), got.size());
  sum.add_all(got2.data(), got2.size());
  std::printf("pitch2d: %dx%d and %dx%d ints, (3,5) %d (44,22) %d, second (1,1) %d\n", w, h, w2, h2,
              got[5 * w + 3], got[w * h - 1], got2[w2 + 1]);
  std::printf("pitch2d: checksum %016llx\n", sum.value());
  CHECK(cudaStreamDestroy(s));
  CHECK(cudaFree(d));
  CHECK(cudaFree(d2));
  std::printf("pitch2d: ok\n");
  return 0;
}
