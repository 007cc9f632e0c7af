#include "daemon/worker/scrub.hpp"

#include <algorithm>

namespace hone::worker {

namespace {

// A 32-bit mix (xor-shift-multiply, constants from Chris Wellons' "lowbias32") of %r10 into
// %r10, with %r11 as scratch; then the seed's high word. Different seeds give unrelated bytes.
constexpr const char* k_mix = R"(    shr.u32 %r11, %r10, 16;
    xor.b32 %r10, %r10, %r11;
    mul.lo.u32 %r10, %r10, 0x7feb352d;
    shr.u32 %r11, %r10, 15;
    xor.b32 %r10, %r10, %r11;
    mul.lo.u32 %r10, %r10, 0x846ca68b;
    shr.u32 %r11, %r10, 16;
    xor.b32 %r10, %r10, %r11;
    xor.b32 %r10, %r10, %r3;
)";

// Registers: %r2 the seed's low word (mixed with the block or thread), %r3 its high word.
constexpr const char* k_seed = R"(    ld.param.u64 %rd1, [seed];
    cvt.u32.u64 %r2, %rd1;
    shr.u64 %rd2, %rd1, 32;
    cvt.u32.u64 %r3, %rd2;
)";

} // namespace

uint32_t scrub_local_frame(int local_bytes) {
  if (local_bytes <= 0) return 0;
  uint32_t frame = (uint32_t(local_bytes) + 15) & ~15u;
  return std::min(frame, k_scrub_local_max);
}

std::string scrub_ptx(uint32_t local_bytes) {
  std::string p = R"(//
// hone's scrub (daemon/worker/scrub.hpp): seeded garbage in shared and local memory before a
// validation run on a GPU.
//
.version 7.0
.target sm_50
.address_size 64

.extern .shared .align 16 .b8 hone_scrub_smem[];

.visible .entry hone_scrub_shared(.param .u64 seed, .param .u32 bytes)
{
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<4>;
)";
  p += k_seed;
  p += R"(    ld.param.u32 %r1, [bytes];
    mov.u32 %r4, %ctaid.x;
    mad.lo.u32 %r2, %r4, 0x9e3779b9, %r2;
    mov.u32 %r5, %tid.x;
    mov.u32 %r6, %ntid.x;
    shl.b32 %r7, %r5, 2;
    shl.b32 %r8, %r6, 2;
    mov.u32 %r9, hone_scrub_smem;
$Lshared:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra.uni $Lshared_done;
    xor.b32 %r10, %r7, %r2;
)";
  p += k_mix;
  p += R"(    add.u32 %r12, %r9, %r7;
    st.volatile.shared.u32 [%r12], %r10;
    add.u32 %r7, %r7, %r8;
    bra.uni $Lshared;
$Lshared_done:
    ret;
}
)";
  if (local_bytes == 0) return p;
  const std::string frame = std::to_string((local_bytes + 15) & ~15u);
  p += R"(
.visible .entry hone_scrub_local(.param .u64 seed)
{
    .local .align 16 .b8 hone_scrub_frame[)" +
       frame + R"(];
    .reg .pred %p<2>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<8>;
)";
  p += k_seed;
  p += R"(    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.u32 %r7, %r4, %r5, %r6;
    mad.lo.u32 %r2, %r7, 0x9e3779b9, %r2;
    mov.u64 %rd3, hone_scrub_frame;
    cvta.local.u64 %rd3, %rd3;
    mov.u32 %r7, 0;
$Llocal:
    setp.ge.u32 %p1, %r7, )" +
       frame + R"(;
    @%p1 bra.uni $Llocal_done;
    xor.b32 %r10, %r7, %r2;
)";
  p += k_mix;
  p += R"(    cvt.u64.u32 %rd4, %r7;
    add.u64 %rd5, %rd3, %rd4;
    st.volatile.u32 [%rd5], %r10;
    add.u32 %r7, %r7, 4;
    bra.uni $Llocal;
$Llocal_done:
    ret;
}
)";
  return p;
}

} // namespace hone::worker
