// hone-llama-gguf: write a tiny llama-architecture model with random weights as a GGUF file,
// through the gguf_* API of llama.cpp's own prebuilt libggml-base.so, so that the tests need no
// downloaded weights (tests/llama/README.md).
//
//   hone-llama-gguf OUT.gguf [--type q4_0|q8_0|f16|f32] [--seed N] [--layers N] [--embd N]
//                   [--ff N] [--heads N] [--kv-heads N] [--vocab N] [--ctx N]
//
// The same arguments give the same bytes on every machine: the weights come from SplitMix64 and a
// Box-Muller transform written here, not from <random>'s distributions (whose algorithms differ
// between standard libraries). The quantized types store every matrix in that type (embeddings and
// the output projection included); norms stay f32, as llama.cpp's converters write them.
//
// Keys and tensor names are llama.cpp's (src/llama-arch.cpp of the bundled source): the
// `llama.*` hyperparameters and an SPM (`tokenizer.ggml.model = llama`) vocabulary of <unk>, <s>,
// </s>, the 256 byte tokens <0x00>..<0xFF> and made-up word pieces.
#include "ggml.h"
#include "gguf.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

struct Options {
  std::string out;
  ggml_type type = GGML_TYPE_Q4_0;
  uint64_t seed = 1;
  int layers = 2;
  int embd = 256;
  int ff = 512;
  int heads = 4;
  int kv_heads = 2;
  int vocab = 512;
  int ctx = 512;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "hone-llama-gguf: %s\n"
               "usage: hone-llama-gguf OUT.gguf [--type q4_0|q8_0|f16|f32] [--seed N] [--layers N]\n"
               "       [--embd N] [--ff N] [--heads N] [--kv-heads N] [--vocab N] [--ctx N]\n",
               why);
  std::exit(2);
}

long parse_number(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) usage((std::string(flag) + " wants a number").c_str());
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) {
      if (!o.out.empty()) usage("more than one output file");
      o.out = a;
      continue;
    }
    if (i + 1 >= argc) usage((a + " wants a value").c_str());
    const char* v = argv[++i];
    if (a == "--type") {
      std::string t = v;
      if (t == "q4_0") o.type = GGML_TYPE_Q4_0;
      else if (t == "q8_0") o.type = GGML_TYPE_Q8_0;
      else if (t == "f16") o.type = GGML_TYPE_F16;
      else if (t == "f32") o.type = GGML_TYPE_F32;
      else usage("--type is q4_0, q8_0, f16 or f32");
    } else if (a == "--seed") o.seed = uint64_t(parse_number("--seed", v));
    else if (a == "--layers") o.layers = int(parse_number("--layers", v));
    else if (a == "--embd") o.embd = int(parse_number("--embd", v));
    else if (a == "--ff") o.ff = int(parse_number("--ff", v));
    else if (a == "--heads") o.heads = int(parse_number("--heads", v));
    else if (a == "--kv-heads") o.kv_heads = int(parse_number("--kv-heads", v));
    else if (a == "--vocab") o.vocab = int(parse_number("--vocab", v));
    else if (a == "--ctx") o.ctx = int(parse_number("--ctx", v));
    else usage(("unknown option " + a).c_str());
  }
  if (o.out.empty()) usage("no output file");
  if (o.layers < 1 || o.heads < 1 || o.kv_heads < 1 || o.heads % o.kv_heads != 0) {
    usage("--heads must be a multiple of --kv-heads, both at least 1");
  }
  if (o.embd % o.heads != 0 || (o.embd / o.heads) % 2 != 0) usage("--embd / --heads must be even");
  // Quantized rows hold whole blocks of 32 values (Q4_0, Q8_0): every matrix's row length
  // (embd for all but ffn_down, ff for ffn_down) must be a multiple of 32.
  if (o.embd % 32 != 0 || o.ff % 32 != 0) usage("--embd and --ff must be multiples of 32");
  if (o.vocab < 3 + 256 + 1) usage("--vocab must leave room for <unk>, <s>, </s> and 256 bytes");
  return o;
}

// SplitMix64 (Steele, Lea, Flood 2014) and Box-Muller: the same numbers everywhere.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double((next() >> 11) + 1) * 0x1.0p-53; } // (0, 1]
  float normal() {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    return float(r * std::cos(6.283185307179586 * uniform()));
  }
};

class Writer {
public:
  Writer(const Options& o) : m_o(o), m_rng{o.seed} {
    ggml_init_params params{};
    params.mem_size = 1024 * ggml_tensor_overhead();
    params.no_alloc = true; // tensor data lives in m_data
    m_ggml = ggml_init(params);
    m_gguf = gguf_init_empty();
  }
  ~Writer() {
    gguf_free(m_gguf);
    ggml_free(m_ggml);
  }

  // A matrix of `rows` rows of `cols` values (ggml's ne = {cols, rows}), normal with deviation
  // `scale`, stored as `type`.
  void matrix(const std::string& name, int cols, int rows, float scale, ggml_type type) {
    std::vector<float> values(size_t(cols) * rows);
    for (float& v : values) v = m_rng.normal() * scale;
    ggml_tensor* t = ggml_new_tensor_2d(m_ggml, type, cols, rows);
    ggml_set_name(t, name.c_str());
    std::vector<uint8_t>& bytes = m_data.emplace_back(ggml_nbytes(t));
    if (type == GGML_TYPE_F32) {
      std::memcpy(bytes.data(), values.data(), bytes.size());
    } else if (type == GGML_TYPE_F16) {
      ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(bytes.data()),
                            int64_t(values.size()));
    } else {
      size_t n = ggml_quantize_chunk(type, values.data(), bytes.data(), 0, rows, cols, nullptr);
      if (n != bytes.size()) {
        std::fprintf(stderr, "hone-llama-gguf: %s: quantized to %zu bytes, expected %zu\n",
                     name.c_str(), n, bytes.size());
        std::exit(1);
      }
    }
    t->data = bytes.data();
    gguf_add_tensor(m_gguf, t);
  }

  // An RMS norm's weights: 1 plus a little noise, f32.
  void norm(const std::string& name, int n) {
    ggml_tensor* t = ggml_new_tensor_1d(m_ggml, GGML_TYPE_F32, n);
    ggml_set_name(t, name.c_str());
    std::vector<uint8_t>& bytes = m_data.emplace_back(ggml_nbytes(t));
    float* w = reinterpret_cast<float*>(bytes.data());
    for (int i = 0; i < n; ++i) w[i] = 1.0f + 0.1f * m_rng.normal();
    t->data = bytes.data();
    gguf_add_tensor(m_gguf, t);
  }

  void hyperparameters() {
    const Options& o = m_o;
    gguf_set_val_str(m_gguf, "general.architecture", "llama");
    gguf_set_val_str(m_gguf, "general.name", "hone random llama");
    gguf_set_val_u32(m_gguf, "llama.context_length", uint32_t(o.ctx));
    gguf_set_val_u32(m_gguf, "llama.embedding_length", uint32_t(o.embd));
    gguf_set_val_u32(m_gguf, "llama.block_count", uint32_t(o.layers));
    gguf_set_val_u32(m_gguf, "llama.feed_forward_length", uint32_t(o.ff));
    gguf_set_val_u32(m_gguf, "llama.attention.head_count", uint32_t(o.heads));
    gguf_set_val_u32(m_gguf, "llama.attention.head_count_kv", uint32_t(o.kv_heads));
    gguf_set_val_u32(m_gguf, "llama.rope.dimension_count", uint32_t(o.embd / o.heads));
    gguf_set_val_f32(m_gguf, "llama.rope.freq_base", 10000.0f);
    gguf_set_val_f32(m_gguf, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gguf_set_val_u32(m_gguf, "llama.vocab_size", uint32_t(o.vocab));
  }

  // <unk>, <s>, </s>, the byte tokens, then word pieces "▁w3".."▁wN" (SPM's word-start mark).
  void vocabulary() {
    std::deque<std::string> pieces; // stable addresses for the char* array
    std::vector<const char*> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;
    auto add = [&](std::string text, int32_t type) {
      pieces.push_back(std::move(text));
      tokens.push_back(pieces.back().c_str());
      scores.push_back(-float(tokens.size()));
      types.push_back(type);
    };
    // llama_token_type: 1 normal, 2 unknown, 3 control, 6 byte.
    add("<unk>", 2);
    add("<s>", 3);
    add("</s>", 3);
    for (int b = 0; b < 256; ++b) {
      char text[8];
      std::snprintf(text, sizeof text, "<0x%02X>", b);
      add(text, 6);
    }
    for (int i = int(tokens.size()); i < m_o.vocab; ++i) add("\xe2\x96\x81w" + std::to_string(i), 1);
    gguf_set_val_str(m_gguf, "tokenizer.ggml.model", "llama");
    gguf_set_arr_str(m_gguf, "tokenizer.ggml.tokens", tokens.data(), tokens.size());
    gguf_set_arr_data(m_gguf, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores.data(), scores.size());
    gguf_set_arr_data(m_gguf, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types.data(), types.size());
    gguf_set_val_u32(m_gguf, "tokenizer.ggml.unknown_token_id", 0);
    gguf_set_val_u32(m_gguf, "tokenizer.ggml.bos_token_id", 1);
    gguf_set_val_u32(m_gguf, "tokenizer.ggml.eos_token_id", 2);
  }

  void tensors() {
    const Options& o = m_o;
    const int head_dim = o.embd / o.heads;
    const int kv = head_dim * o.kv_heads;
    const float in_scale = 1.0f / std::sqrt(float(o.embd)); // keeps activations O(1)
    matrix("token_embd.weight", o.embd, o.vocab, 1.0f, o.type);
    for (int l = 0; l < o.layers; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      norm(p + "attn_norm.weight", o.embd);
      matrix(p + "attn_q.weight", o.embd, o.embd, in_scale, o.type);
      matrix(p + "attn_k.weight", o.embd, kv, in_scale, o.type);
      matrix(p + "attn_v.weight", o.embd, kv, in_scale, o.type);
      matrix(p + "attn_output.weight", o.embd, o.embd, in_scale, o.type);
      norm(p + "ffn_norm.weight", o.embd);
      matrix(p + "ffn_gate.weight", o.embd, o.ff, in_scale, o.type);
      matrix(p + "ffn_up.weight", o.embd, o.ff, in_scale, o.type);
      matrix(p + "ffn_down.weight", o.ff, o.embd, 1.0f / std::sqrt(float(o.ff)), o.type);
    }
    norm("output_norm.weight", o.embd);
    // Logits with a spread of a few units: greedy choices are clear more often than not, so
    // that two backends' small rounding differences rarely flip one (tests/llama/README.md).
    matrix("output.weight", o.embd, o.vocab, 3.0f * in_scale, o.type);
  }

  bool write() {
    gguf_set_val_u32(m_gguf, "general.file_type", file_type());
    return gguf_write_to_file(m_gguf, m_o.out.c_str(), false);
  }

private:
  // llama_ftype: 0 all f32, 1 mostly f16, 2 mostly q4_0, 7 mostly q8_0.
  uint32_t file_type() const {
    switch (m_o.type) {
    case GGML_TYPE_F32: return 0;
    case GGML_TYPE_F16: return 1;
    case GGML_TYPE_Q4_0: return 2;
    case GGML_TYPE_Q8_0: return 7;
    default: return 0;
    }
  }

  const Options& m_o;
  Random m_rng;
  ggml_context* m_ggml = nullptr;
  gguf_context* m_gguf = nullptr;
  std::deque<std::vector<uint8_t>> m_data; // tensor bytes, alive until written
};

} // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  Writer w(o);
  w.hyperparameters();
  w.vocabulary();
  w.tensors();
  if (!w.write()) {
    std::fprintf(stderr, "hone-llama-gguf: cannot write %s\n", o.out.c_str());
    return 1;
  }
  return 0;
}
