// libFuzzer target: the protocol's decoders (common/protocol.hpp, capture.hpp, job.hpp, guard.hpp)
// over hostile bytes, as honed and the shim meet them on the socket. The input is read as a stream
// of frames; each payload goes to the decoder its type names and to every other decoder as well.
// Nothing may crash, hang or allocate without bound, and whatever decodes must survive a round
// trip: encode it, decode that, and encode again to the same bytes.
#include "common/capture.hpp"
#include "common/guard.hpp"
#include "common/job.hpp"
#include "common/protocol.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

using namespace hone;

namespace {

template <class M> void round_trip(const M& m) {
  wire::Writer first;
  encode(first, m);
  wire::Reader r(first.out());
  M back;
  if (!decode(r, back)) std::abort(); // what decoded once must decode again
  wire::Writer second;
  encode(second, back);
  if (first.out() != second.out()) std::abort();
}

template <class M> void try_decode(std::string_view payload) {
  wire::Reader r(payload);
  M m;
  if (decode(r, m)) round_trip(m);
}

void decode_all(std::string_view payload, proto::MsgType type) {
  // The decoder the type names first (what a peer would do), then every other one.
  switch (type) {
  case proto::MsgType::hello:
    try_decode<proto::Hello>(payload);
    break;
  case proto::MsgType::hello_ack:
    try_decode<proto::HelloAck>(payload);
    break;
  case proto::MsgType::error:
    try_decode<proto::ErrorMsg>(payload);
    break;
  case proto::MsgType::kernels:
    try_decode<proto::Kernels>(payload);
    break;
  case proto::MsgType::stats:
    try_decode<proto::Stats>(payload);
    break;
  case proto::MsgType::image:
    try_decode<proto::Image>(payload);
    break;
  case proto::MsgType::image_request:
    try_decode<proto::ImageRequest>(payload);
    break;
  default:
    break;
  }
  try_decode<proto::Hello>(payload);
  try_decode<proto::HelloAck>(payload);
  try_decode<proto::ErrorMsg>(payload);
  try_decode<proto::Kernels>(payload);
  try_decode<proto::Stats>(payload);
  try_decode<proto::ImageRequest>(payload);
  try_decode<proto::Image>(payload);
  try_decode<Capture>(payload);
  try_decode<proto::VariantStatus>(payload);
  try_decode<proto::CaptureRequest>(payload);
  try_decode<proto::InstallVariant>(payload);
  try_decode<proto::RemoveVariant>(payload);
  try_decode<Job>(payload);
  try_decode<Verdict>(payload);
  try_decode<Guard>(payload);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // Input too short to hold a header still reaches the decoders.
  if (in.size() < proto::k_header_size) {
    decode_all(in, proto::MsgType(0));
    return 0;
  }
  while (in.size() >= proto::k_header_size) {
    const char* why = nullptr;
    auto h = proto::FrameHeader::decode(in.data(), &why);
    if (!h) {
      if (!why) std::abort(); // a refusal always says why
      // A receiver drops the connection here; the decoders still get the bytes.
      decode_all(in.substr(proto::k_header_size), proto::MsgType(0));
      break;
    }
    if (h->length > proto::k_max_payload) std::abort();
    char again[proto::k_header_size];
    h->encode(again);
    if (std::string_view(again, sizeof again) != in.substr(0, proto::k_header_size)) std::abort();
    in.remove_prefix(proto::k_header_size);
    // A truncated final frame is decoded as far as it goes, as a reader must never trust length.
    std::string_view payload = in.substr(0, h->length);
    decode_all(payload, h->type);
    in.remove_prefix(payload.size());
  }
  return 0;
}
