// The wire codec and the protocol messages: round trips, and hostile input never crashes.
#include "common/capture.hpp"
#include "common/protocol.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace hone;
using namespace hone::proto;

namespace {

template <class M> M round_trip(const M& m) {
  wire::Writer w;
  encode(w, m);
  wire::Reader r(w.out());
  M out;
  EXPECT_TRUE(decode(r, out)) << r.error();
  EXPECT_EQ(r.remaining(), 0u);
  return out;
}

} // namespace

TEST(Identity, HashIsStableAndHexRoundTrips) {
  const char ptx[] = ".version 9.0\n.target sm_90\n.address_size 64\n";
  ImageHash a = ImageHash::of(ptx, sizeof ptx);
  ImageHash b = ImageHash::of(ptx, sizeof ptx);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, ImageHash::of(ptx, sizeof ptx - 1));
  EXPECT_EQ(a.hex().size(), 32u);
  EXPECT_EQ(ImageHash::from_hex(a.hex()), a);
  EXPECT_FALSE(ImageHash::from_hex("xyz").has_value());
  KernelKey k{a, "_Z6kernelPf"};
  auto parsed = KernelKey::parse(k.str());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, k);
  EXPECT_FALSE(KernelKey::parse(a.hex() + ":").has_value());
  EXPECT_FALSE(KernelKey::parse("nothex:kernel").has_value());
}

TEST(Protocol, FrameHeaderChecks) {
  FrameHeader h;
  h.type = MsgType::stats;
  h.length = 12;
  h.seq = 7;
  char buf[k_header_size];
  h.encode(buf);
  const char* why = nullptr;
  auto back = FrameHeader::decode(buf, &why);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->type, MsgType::stats);
  EXPECT_EQ(back->length, 12u);
  EXPECT_EQ(back->seq, 7u);

  FrameHeader big = h;
  big.length = k_max_payload + 1;
  big.encode(buf);
  EXPECT_FALSE(FrameHeader::decode(buf, &why).has_value());
  EXPECT_STREQ(why, "frame payload over the 4 MiB limit");
  buf[0] = 'X';
  EXPECT_FALSE(FrameHeader::decode(buf, &why).has_value());
}

TEST(Protocol, MessagesRoundTrip) {
  Hello h;
  h.pid = 42;
  h.uid = 1000;
  h.exe = "/usr/bin/python3";
  h.device_name = "NVIDIA H200";
  h.arch = "sm_90";
  h.driver_version = 13000;
  h.client_version = "0.1.0";
  Hello h2 = round_trip(h);
  EXPECT_EQ(h2.pid, 42u);
  EXPECT_EQ(h2.exe, h.exe);
  EXPECT_EQ(h2.arch, "sm_90");

  Kernels ks;
  ks.kernels.push_back({7, {ImageHash{1, 2}, "saxpy"}, ImageFormat::ptx, 1234, true});
  Kernels ks2 = round_trip(ks);
  ASSERT_EQ(ks2.kernels.size(), 1u);
  EXPECT_EQ(ks2.kernels[0].key.entry, "saxpy");
  EXPECT_EQ(ks2.kernels[0].key.image, (ImageHash{1, 2}));
  EXPECT_TRUE(ks2.kernels[0].source_known);
  EXPECT_TRUE(ks2.arch.empty()); // no device appended
  // The device appended when the hello could not name it, and what an older encoder sends
  // (no device) decoded by the newer decoder.
  ks.device_name = "NVIDIA H200";
  ks.arch = "sm_90";
  ks.driver_version = 13000;
  Kernels ks3 = round_trip(ks);
  EXPECT_EQ(ks3.device_name, "NVIDIA H200");
  EXPECT_EQ(ks3.arch, "sm_90");
  EXPECT_EQ(ks3.driver_version, 13000u);
  ASSERT_EQ(ks3.kernels.size(), 1u);

  Stats st;
  st.uptime_ns = 99;
  st.kernels.push_back({7, 100, 40, 2, 3, 4500, {10, 1, 1}, {256, 1, 1}});
  Stats st2 = round_trip(st);
  ASSERT_EQ(st2.kernels.size(), 1u);
  EXPECT_EQ(st2.kernels[0].launches, 100u);
  EXPECT_EQ(st2.kernels[0].block[0], 256u);
  EXPECT_TRUE(st2.guard_misses.empty());
  // Guard misses come after the graph part, which is then written even when empty.
  st.guard_misses = {{7, 12}, {9, 1}};
  Stats st3 = round_trip(st);
  ASSERT_EQ(st3.guard_misses.size(), 2u);
  EXPECT_EQ(st3.guard_misses[0], (std::pair<uint64_t, uint64_t>{7, 12}));
  EXPECT_EQ(st3.guard_misses[1].second, 1u);
  EXPECT_TRUE(st3.graph_kernels.empty());
  EXPECT_EQ(st3.graph_replays, 0u);

  Image im;
  im.image = ImageHash{5, 6};
  im.available = true;
  im.format = ImageFormat::ptx;
  im.size = 77;
  im.source = SourceInfo{"prog.cu", "__global__ void k(){}", {{"a.h", "int x;"}}, {"-arch=sm_90"}};
  Image im2 = round_trip(im);
  ASSERT_TRUE(im2.source.has_value());
  EXPECT_EQ(im2.source->headers.at(0).first, "a.h");
  EXPECT_EQ(im2.source->options.at(0), "-arch=sm_90");
  EXPECT_FALSE(im2.linked.has_value());
}

// A cubin the JIT linker made carries its inputs; a message from an older shim (it ends after the
// Triton field) reads without them.
TEST(Protocol, ImageWithLinkInputsRoundTripsAndOlderMessagesStillRead) {
  Image im;
  im.image = ImageHash{8, 9};
  im.available = true;
  im.format = ImageFormat::cubin;
  im.size = 4096;
  Image::Linked linked;
  linked.inputs.push_back({1, "m00000_a3-optimized.cl", ".version 9.0\n.entry k()\n{ ret; }\n", 33,
                           true});
  linked.inputs.push_back({4, "/usr/local/cuda/lib64/libcudadevrt.a", "", 0, false});
  im.linked = linked;
  Image got = round_trip(im);
  ASSERT_TRUE(got.linked.has_value());
  ASSERT_EQ(got.linked->inputs.size(), 2u);
  EXPECT_EQ(got.linked->inputs[0].type, 1u);
  EXPECT_EQ(got.linked->inputs[0].name, "m00000_a3-optimized.cl");
  EXPECT_EQ(got.linked->inputs[0].ptx, linked.inputs[0].ptx);
  EXPECT_EQ(got.linked->inputs[0].ptx_size, 33u);
  EXPECT_TRUE(got.linked->inputs[0].from_nvrtc);
  EXPECT_EQ(got.linked->inputs[1].type, 4u);
  EXPECT_TRUE(got.linked->inputs[1].ptx.empty());
  EXPECT_FALSE(got.linked->inputs[1].from_nvrtc);

  // An older shim's message: the same bytes up to the end of the Triton field.
  Image plain = im;
  plain.linked.reset();
  wire::Writer w;
  encode(w, plain);
  std::string older = w.out();
  older.pop_back(); // the "no link inputs" flag an older shim never wrote
  wire::Reader r(older);
  Image out;
  ASSERT_TRUE(decode(r, out));
  EXPECT_FALSE(out.linked.has_value());

  // A count of inputs larger than the bytes that follow could hold is refused, not allocated.
  wire::Writer hostile;
  encode(hostile, plain);
  std::string bytes = hostile.out();
  bytes.back() = 1; // "link inputs follow"
  bytes += std::string("\xff\xff\x00\x00", 4);
  wire::Reader r2(bytes);
  Image out2;
  EXPECT_FALSE(decode(r2, out2));
}

TEST(Protocol, RejectsInconsistentMessages) {
  Stats st;
  st.kernels.push_back({1, 2, 0, 0, 3, 0, {}, {}}); // more sampled than launched
  wire::Writer w;
  encode(w, st);
  wire::Reader r(w.out());
  Stats out;
  EXPECT_FALSE(decode(r, out));

  Hello h;
  h.version_min = 3;
  h.version_max = 2;
  wire::Writer w2;
  encode(w2, h);
  wire::Reader r2(w2.out());
  Hello hout;
  EXPECT_FALSE(decode(r2, hout));
}

// `whole` shares a byte with `shadow`: a request without it encodes as before (the old boolean),
// and a byte with other bits set is refused.
TEST(Protocol, CaptureRequestFlags) {
  for (bool shadow : {false, true}) {
    for (bool whole : {false, true}) {
      CaptureRequest in;
      in.request = 7;
      in.kernel = 9;
      in.launches = 2;
      in.shadow = shadow;
      in.whole = whole;
      wire::Writer w;
      encode(w, in);
      const std::string bytes = w.out();
      if (!whole) EXPECT_EQ(uint8_t(bytes.back()), shadow ? 1 : 0);
      wire::Reader r(bytes);
      CaptureRequest out;
      ASSERT_TRUE(decode(r, out)) << r.error();
      EXPECT_EQ(out.shadow, shadow);
      EXPECT_EQ(out.whole, whole);
    }
  }
  CaptureRequest in;
  wire::Writer w;
  encode(w, in);
  std::string bytes = w.out();
  bytes.back() = char(4);
  wire::Reader r(bytes);
  CaptureRequest out;
  EXPECT_FALSE(decode(r, out));
}

TEST(Protocol, HostileBytesNeverCrash) {
  std::mt19937_64 rng(1);
  Kernels ks;
  for (int i = 0; i < 5; ++i) ks.kernels.push_back({uint64_t(i), {ImageHash{1, 2}, "k"}, ImageFormat::ptx, 1, false});
  wire::Writer w;
  encode(w, ks);
  std::string good = w.out();
  int failures = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string bad = good;
    if (round % 3 == 0) bad.resize(rng() % good.size());
    else for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = char(rng());
    wire::Reader r(bad);
    Kernels out;
    if (!decode(r, out)) ++failures;
    Stats s;
    wire::Reader r2(bad);
    (void)decode(r2, s);
    Image im;
    wire::Reader r3(bad);
    (void)decode(r3, im);
  }
  EXPECT_GT(failures, 0);
  // A huge declared count is refused before anything is allocated.
  wire::Writer huge;
  huge.u32(0xffffffffu);
  wire::Reader r(huge.out());
  Kernels out;
  EXPECT_FALSE(decode(r, out));
  EXPECT_TRUE(out.kernels.empty());
}

namespace {

std::string encoded(const Capture& c) {
  wire::Writer w;
  encode(w, c);
  return w.out();
}

Capture two_buffer_capture() {
  Capture c;
  c.request = 7;
  c.kernel = 3;
  c.key.entry = "rms_norm_f32";
  c.params = {{0, 8}, {8, 8}};
  c.param_bytes.assign(16, '\0');
  uint64_t x = 0x7f0000001000, w = 0x7f0000100000;
  std::memcpy(c.param_bytes.data(), &x, 8);
  std::memcpy(c.param_bytes.data() + 8, &w, 8);
  c.buffers.push_back({0, 0, x, x, 4096, 0, ~0ull});
  CaptureBuffer b{1, 0, w, w + 65536, 512, 4096, ~0ull};
  b.bounded = true;
  b.alloc_base = w;
  b.alloc_size = 8 << 20;
  c.buffers.push_back(b);
  c.data_bytes = 4096 + 512;
  c.pointers_from_analysis = true;
  return c;
}

} // namespace

// Bounded captures (shim/README.md): a buffer captured by a range of its allocation travels with
// the allocation, and its pointer may lie outside the range but not outside the allocation.
TEST(CaptureFormat, BoundedRangesRoundTrip) {
  Capture c = two_buffer_capture();
  c.whole_why = "";
  wire::Writer w;
  encode(w, c);
  wire::Reader r(w.out());
  Capture back;
  ASSERT_TRUE(decode(r, back)) << r.error();
  EXPECT_EQ(encoded(back), encoded(c));
  EXPECT_TRUE(back.buffers[1] == c.buffers[1]);
  EXPECT_TRUE(back.buffers[1].bounded);
  EXPECT_EQ(back.buffers[1].range_offset(), 65536u);
  EXPECT_EQ(back.buffers[1].allocation_size(), 8u << 20);
  EXPECT_EQ(back.buffers[0].allocation_size(), 4096u);

  // A range outside its allocation is refused.
  c.buffers[1].alloc_size = 65536;
  wire::Writer bad;
  encode(bad, c);
  wire::Reader rb(bad.out());
  EXPECT_FALSE(decode(rb, back));
}

// A capture written before bounded captures (a boolean where the flags are, nothing after it)
// still decodes, every buffer whole.
TEST(CaptureFormat, CapturesWrittenBeforeBoundedRangesStillDecode) {
  Capture c = two_buffer_capture();
  c.buffers.pop_back();
  c.data_bytes = 4096;
  wire::Writer w;
  encode(w, c);
  // New: ... flags(1 byte) | one bool per buffer | whole_why (u32 length, 0) — the old format
  // ends at a boolean where the flags are.
  std::string old = w.out().substr(0, w.out().size() - c.buffers.size() - 4);
  old.back() = '\1';
  wire::Reader r(old);
  Capture back;
  ASSERT_TRUE(decode(r, back)) << r.error();
  EXPECT_EQ(encoded(back), encoded(c));
  EXPECT_TRUE(back.buffers[0] == c.buffers[0]);
  EXPECT_FALSE(back.buffers[0].bounded);
}
