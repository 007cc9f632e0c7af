// Parser and printer: every construct nvcc and NVRTC emit, round trips, and malformed input.
#include "ptx/parser.hpp"
#include "ptx/printer.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

using namespace hone::ptx;

namespace {

// A module exercising the constructs the parser must model.
const char* k_everything = R"PTX(//
// hand-written: every construct of nvcc/NVRTC output
//
.version 8.5
.target sm_80, texmode_independent
.address_size 64

	// .globl	kernel
.extern .func  (.param .b32 func_retval0) vprintf
(
	.param .b64 vprintf_param_0,
	.param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[6] = {104, 101, 108, 108, 111, 0};
.const .align 4 .b8 table[8] = {0, 0, 128, 63, 0, 0, 0, 64};
.const .align 8 .u64 ptrs[2] = {generic($str), generic($str)+2};
.global .align 4 .f32 scale = 0f3F800000;
.visible .global .align 8 .f64 dscale[2] = {0d3FF0000000000000, 1.5};
.extern .shared .align 16 .b8 dyn_smem[];
.shared .align 4 .b8 tile[1024];

.func  (.param .b32 func_retval0) helper(
	.param .b32 helper_param_0
)
{
	.reg .f32 	%f<3>;
	ld.param.f32 	%f1, [helper_param_0];
	add.rn.ftz.f32 	%f2, %f1, 0fBF800000;   /* block comment */
	st.param.f32 	[func_retval0+0], %f2;
	ret;
}

.visible .entry kernel(
	.param .u64 .ptr .global .align 16 kernel_param_0,
	.param .align 8 .b8 kernel_param_1[16],
	.param .u32 kernel_param_2,
	.param .f64 kernel_param_3
)
.maxntid 256, 1, 1
.minnctapersm 2
.pragma "nounroll";
{
	.local .align 4 .b8 	__local_depot0[16];
	.reg .b64 	%SP;
	.reg .pred 	%p<4>;
	.reg .b16 	%rs<4>;
	.reg .b32 	%r<20>;
	.reg .f32 	%f<8>;
	.reg .b64 	%rd<16>;
	.reg .f64 	%fd<3>;

	mov.u64 	%SP, __local_depot0;
	ld.param.u64 	%rd1, [kernel_param_0];
	ld.param.v2.u64 	{%rd2, %rd3}, [kernel_param_1];
	ld.param.u32 	%r1, [kernel_param_2];
	mov.u32 	%r2, %tid.x;
	mov.u32 	%r3, %ctaid.y;
	mad.lo.s32 	%r4, %r3, %r2, -1;
	setp.ge.u32 	%p1, %r4, %r1;
	@%p1 bra 	$L__BB0_4;
	@!%p1 bra.uni 	$L__BB0_1;
$L__BB0_1:
	cvta.to.global.u64 	%rd4, %rd1;
	mul.wide.s32 	%rd5, %r4, 4;
	add.s64 	%rd6, %rd4, %rd5;
	ld.global.nc.v4.f32 	{%f1, %f2, %f3, %f4}, [%rd6+16];
	ld.global.f32 	%f5, [%rd6+-4];
	shfl.sync.bfly.b32 	%r5|%p2, %r4, 1, 31, -1;
	mov.b32 	%r6, 0x7fffffff;
	and.b32 	%r7, %r6, 017;
	or.b32 	%r8, %r7, 0b101;
	mov.u64 	%rd7, 18446744073709551615U;
	mov.f64 	%fd1, 0d3FF0000000000000;
	mov.f64 	%fd2, 2.5e1;
	mov.u32 	%r9, tile;
	st.shared.f32 	[%r9], %f5;
	st.shared.f32 	[tile+8], %f1;
	ld.shared.u32 	%r10, [dyn_smem];
	{
	.reg .b16 low, high;
	mov.b32 {low, high}, %r10;
	cvt.f32.f16 %f6, low;
	}
	// begin inline asm
	{ cvt.rn.f16.f32 %rs1, %f6;}

	// end inline asm
	{ // callseq 0, 0
	.param .b32 param0;
	st.param.f32 	[param0+0], %f6;
	.param .b32 retval0;
	call.uni (retval0),
	helper,
	(
	param0
	);
	ld.param.f32 	%f7, [retval0+0];
	} // callseq 0
	atom.global.add.f32 	%f8, [%rd6], %f7;
	red.global.add.u32 	[%rd6], 1;
	vote.sync.ballot.b32 	%r11, %p1, -1;
	bar.sync 	0;
	st.global.v2.f32 	[%rd2], {%f7, %f8};
	mov.b64 	{%r12, _}, %rd3;
	st.local.u32 	[%SP+4], %r12;
	ld.const.f32 	%f8, [table+4];
	brkpt;
	newfangled.sync.op.b32 	%r13, [%rd6], {%r1, %r2};
$L__BB0_4:
	ret;
}
)PTX";

Module parse_ok(std::string_view text) {
  auto m = parse(text, "test.ptx");
  EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().message);
  if (!m) return Module{};
  return std::move(*m);
}

const Instruction* find_instruction(const Function& f, std::string_view text) {
  for (const auto& st : f.body) {
    if (const auto* i = std::get_if<Instruction>(&st.item); i && print(*i).starts_with(text)) {
      return i;
    }
  }
  return nullptr;
}

} // namespace

TEST(PtxParser, ModuleDirectives) {
  Module m = parse_ok(k_everything);
  EXPECT_EQ(m.version_major, 8u);
  EXPECT_EQ(m.version_minor, 5u);
  ASSERT_EQ(m.target.size(), 2u);
  EXPECT_EQ(m.target[0], "sm_80");
  EXPECT_EQ(m.target[1], "texmode_independent");
  EXPECT_EQ(m.address_size, 64u);
}

TEST(PtxParser, Variables) {
  Module m = parse_ok(k_everything);
  const VarDecl* str = m.variable("$str");
  ASSERT_NE(str, nullptr);
  EXPECT_EQ(str->space, Space::global);
  EXPECT_EQ(str->size_bytes(), 6u);
  ASSERT_EQ(str->init_values.size(), 6u);
  EXPECT_EQ(str->init_values[0].bits, 104u);

  const VarDecl* ptrs = m.variable("ptrs");
  ASSERT_NE(ptrs, nullptr);
  ASSERT_EQ(ptrs->init_values.size(), 2u);
  EXPECT_TRUE(ptrs->init_values[1].generic);
  EXPECT_EQ(ptrs->init_values[1].name, "$str");
  EXPECT_EQ(ptrs->init_values[1].offset, 2);

  const VarDecl* dscale = m.variable("dscale");
  ASSERT_NE(dscale, nullptr);
  ASSERT_EQ(dscale->attrs.size(), 1u);
  EXPECT_EQ(dscale->attrs[0], "visible");
  ASSERT_EQ(dscale->init_values.size(), 2u);
  EXPECT_EQ(dscale->init_values[1].kind, InitValue::Kind::f64);
  double d;
  std::memcpy(&d, &dscale->init_values[1].bits, 8);
  EXPECT_EQ(d, 1.5);

  const VarDecl* dyn = m.variable("dyn_smem");
  ASSERT_NE(dyn, nullptr);
  EXPECT_TRUE(dyn->is_extern());
  EXPECT_EQ(dyn->dims, std::vector<int64_t>{-1});
  EXPECT_EQ(dyn->align, 16u);
}

TEST(PtxParser, FunctionsAndParameters) {
  Module m = parse_ok(k_everything);
  const Function* vprintf = m.function("vprintf");
  ASSERT_NE(vprintf, nullptr);
  EXPECT_FALSE(vprintf->has_body);
  EXPECT_EQ(vprintf->returns.size(), 1u);

  const Function* k = m.function("kernel");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->is_entry);
  ASSERT_EQ(k->params.size(), 4u);
  EXPECT_TRUE(k->params[0].ptr);
  EXPECT_EQ(k->params[0].ptr_space, Space::global);
  EXPECT_EQ(k->params[0].ptr_align, 16u);
  EXPECT_EQ(k->params[1].array, 16);
  EXPECT_EQ(k->params[1].align, 8u);
  EXPECT_EQ(k->params[1].size_bytes(), 16u);
  ASSERT_NE(k->directive("maxntid"), nullptr);
  EXPECT_EQ(k->directive("maxntid")->values, (std::vector<int64_t>{256, 1, 1}));
  EXPECT_EQ(k->directive("minnctapersm")->values, std::vector<int64_t>{2});
  ASSERT_NE(k->directive("pragma"), nullptr);
  EXPECT_EQ(k->directive("pragma")->text, "\x2epragma \"nounroll\";");
}

TEST(PtxParser, InstructionsAndOperands) {
  Module m = parse_ok(k_everything);
  const Function* k = m.function("kernel");
  ASSERT_NE(k, nullptr);

  const auto* guarded = find_instruction(*k, "@!%p1 bra.uni");
  ASSERT_NE(guarded, nullptr);
  EXPECT_TRUE(guarded->guard_negated);
  EXPECT_EQ(guarded->guard, "%p1");
  EXPECT_EQ(guarded->operands[0].kind, Operand::Kind::symbol);

  const auto* vload = find_instruction(*k, "ld.global.nc.v4.f32");
  ASSERT_NE(vload, nullptr);
  EXPECT_EQ(vload->op, Opcode::ld);
  EXPECT_EQ(vload->mods, (std::vector<std::string_view>{"global", "nc", "v4", "f32"}));
  EXPECT_EQ(vload->space(), Space::global);
  ASSERT_EQ(vload->operands[0].kind, Operand::Kind::vector);
  EXPECT_EQ(vload->operands[0].elems.size(), 4u);
  EXPECT_EQ(vload->operands[1].kind, Operand::Kind::address);
  EXPECT_TRUE(vload->operands[1].base_is_reg);
  EXPECT_EQ(vload->operands[1].value, 16);

  const auto* negoff = find_instruction(*k, "ld.global.f32");
  ASSERT_NE(negoff, nullptr);
  EXPECT_EQ(negoff->operands[1].value, -4);

  const auto* shfl = find_instruction(*k, "shfl.sync.bfly.b32");
  ASSERT_NE(shfl, nullptr);
  ASSERT_EQ(shfl->operands[0].kind, Operand::Kind::pair);
  EXPECT_EQ(shfl->operands[0].elems[1].name, "%p2");
  EXPECT_EQ(shfl->operands[4].value, -1);

  EXPECT_EQ(find_instruction(*k, "mov.b32 \t%r6")->operands[1].value, 0x7fffffff);
  EXPECT_EQ(find_instruction(*k, "and.b32")->operands[2].value, 15);  // octal 017
  EXPECT_EQ(find_instruction(*k, "or.b32")->operands[2].value, 5);    // 0b101
  const auto* umax = find_instruction(*k, "mov.u64 \t%rd7");
  EXPECT_EQ(uint64_t(umax->operands[1].value), UINT64_MAX);
  EXPECT_TRUE(umax->operands[1].unsigned_suffix);
  EXPECT_EQ(find_instruction(*k, "mov.f64 \t%fd1")->operands[1].bits, 0x3FF0000000000000u);
  const auto* dec = find_instruction(*k, "mov.f64 \t%fd2");
  EXPECT_EQ(dec->operands[1].kind, Operand::Kind::imm_dec);
  double d;
  std::memcpy(&d, &dec->operands[1].bits, 8);
  EXPECT_EQ(d, 25.0);

  const auto* symaddr = find_instruction(*k, "st.shared.f32 \t[tile+8]");
  ASSERT_NE(symaddr, nullptr);
  EXPECT_FALSE(symaddr->operands[0].base_is_reg);
  EXPECT_EQ(symaddr->operands[0].name, "tile");
  EXPECT_EQ(symaddr->operands[0].value, 8);

  // scope-local registers of inline asm are registers, not symbols
  const auto* unpack = find_instruction(*k, "mov.b32 \t{low, high}");
  ASSERT_NE(unpack, nullptr);
  EXPECT_EQ(unpack->operands[0].elems[0].kind, Operand::Kind::reg);

  const auto* call = find_instruction(*k, "call.uni");
  ASSERT_NE(call, nullptr);
  ASSERT_EQ(call->operands.size(), 3u);
  EXPECT_EQ(call->operands[0].kind, Operand::Kind::list);
  EXPECT_EQ(call->operands[1].name, "helper");
  EXPECT_EQ(call->operands[2].elems.at(0).name, "param0");

  const auto* sink = find_instruction(*k, "mov.b64 \t{%r12, _}");
  ASSERT_NE(sink, nullptr);
  EXPECT_EQ(sink->operands[0].elems[1].kind, Operand::Kind::sink);

  const auto* sreg = find_instruction(*k, "mov.u32 \t%r2");
  EXPECT_EQ(sreg->operands[1].name, "%tid.x");
}

TEST(PtxParser, ScopesAndOpaqueInstructions) {
  Module m = parse_ok(k_everything);
  const Function* k = m.function("kernel");
  int begins = 0, ends = 0, opaque = 0;
  for (const auto& st : k->body) {
    begins += std::holds_alternative<ScopeBegin>(st.item);
    ends += std::holds_alternative<ScopeEnd>(st.item);
    if (const auto* o = std::get_if<Opaque>(&st.item)) {
      ++opaque;
      EXPECT_EQ(o->text, "newfangled.sync.op.b32 \t%r13, [%rd6], {%r1, %r2};");
    }
  }
  EXPECT_EQ(begins, 3);
  EXPECT_EQ(ends, 3);
  EXPECT_EQ(opaque, 1);
  // printed back verbatim
  EXPECT_NE(print(m).find("newfangled.sync.op.b32 \t%r13, [%rd6], {%r1, %r2};"), std::string::npos);
}

TEST(PtxParser, RoundTripIsStable) {
  Module m = parse_ok(k_everything);
  std::string once = print(m);
  Module m2 = parse_ok(once);
  EXPECT_TRUE(m == m2) << once;
  EXPECT_EQ(print(m2), once);
}

// Found by the fuzzer: an initializer's text is printed verbatim, so a line comment inside it
// must not take the ';' with it.
TEST(PtxParser, InitializerWithALineCommentRoundTrips) {
  Module m = parse_ok(".version 9.0\n.target sm_90\n.address_size 64\n"
                      ".const .align 4 .b8 t[2] = {1, // one\n 2} // two\n;\n");
  std::string once = print(m);
  Module m2 = parse_ok(once);
  EXPECT_TRUE(m == m2) << once;
  EXPECT_EQ(print(m2), once);
}

TEST(PtxParser, TrailingNulIsAccepted) {
  std::string text = ".version 9.0\n.target sm_90\n.address_size 64\n";
  text.push_back('\0');
  EXPECT_TRUE(parse(text).has_value());
}

struct Malformed {
  const char* name;
  std::string text;
  std::string where;   // expected "line:col"
  std::string message; // expected substring
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.name; }

class PtxMalformed : public ::testing::TestWithParam<Malformed> {};

TEST_P(PtxMalformed, GivesPositionedError) {
  const auto& c = GetParam();
  auto m = parse(c.text, "bad.ptx");
  ASSERT_FALSE(m.has_value()) << c.name;
  const auto& msg = m.error().message;
  EXPECT_TRUE(msg.starts_with("bad.ptx:" + c.where + ": ")) << msg;
  EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
}

const std::string k_head = ".version 9.0\n.target sm_90\n.address_size 64\n";

INSTANTIATE_TEST_SUITE_P(
    Cases, PtxMalformed,
    ::testing::Values(
        Malformed{"empty", "", "1:1", "expected .version"},
        Malformed{"no_version", ".target sm_90\n", "1:1", "expected .version"},
        Malformed{"bad_version", ".version x\n", "1:10", "malformed .version"},
        Malformed{"garbage", k_head + "!!!\n", "4:1", "expected a directive"},
        Malformed{"unknown_directive", k_head + ".frobnicate 1;\n", "4:1",
                  "unknown module directive .frobnicate"},
        Malformed{"unclosed_body", k_head + ".entry k()\n{\n\tret;\n", "4:1", "the body of k is not closed"},
        Malformed{"missing_semicolon", k_head + ".entry k()\n{\n\tadd.s32 %r1, %r2, %r3\n}\n",
                  "7:1", "',' or ';'"},
        Malformed{"bad_f32_literal", k_head + ".entry k()\n{\n\tmov.f32 %f1, 0f3F80;\n}\n",
                  "6:15", "exactly 8 hex digits"},
        Malformed{"huge_integer",
                  k_head + ".entry k()\n{\n\tmov.u64 %rd1, 99999999999999999999999;\n}\n",
                  "6:16", "does not fit in 64 bits"},
        Malformed{"unterminated_comment", k_head + "/* forever", "4:1",
                  "unterminated block comment"},
        Malformed{"bad_param", k_head + ".entry k(.param .u32)\n{\n}\n", "4:21",
                  "expected a parameter name"},
        Malformed{"bad_reg_count", k_head + ".entry k()\n{\n\t.reg .b32 %r<x>;\n}\n", "6:15",
                  "expected a number"},
        Malformed{"stray_brace", k_head + "}\n", "4:1", "expected a directive"},
        Malformed{"nul_inside", k_head + std::string(".entry k()\n{\0}\n", 15), "5:2",
                  "NUL byte"},
        Malformed{"unbalanced_vector",
                  k_head + ".entry k()\n{\n\tmov.b64 {%r1, %r2, %rd1;\n}\n", "6:25",
                  "'}' to close a vector"},
        Malformed{"deep_nesting",
                  k_head + ".entry k()\n{\n\tmov.b32 " + std::string(40, '{') + "%r1" +
                      std::string(40, '}') + ";\n}\n",
                  "6:26", "nested too deeply"},
        Malformed{"bad_align", k_head + ".global .align 3 .b8 x[4];\n", "4:17",
                  "power of two"},
        // Found by the fuzzer: printed back, the '=' was lost and the module changed.
        Malformed{"empty_initializer", k_head + ".const .align 4 .b8 cscale[16] = ;\n", "4:32",
                  "'=' without an initializer"},
        Malformed{"type_missing", k_head + ".global .align 4 x;\n", "4:18",
                  "expected the type"}),
    [](const ::testing::TestParamInfo<Malformed>& info) { return std::string(info.param.name); });

TEST(PtxParser, EveryTruncationFailsCleanlyOrParses) {
  // Cutting a valid module at every byte must give a clean error or a valid (shorter) module.
  std::string text = k_everything;
  for (size_t n = 0; n < text.size(); ++n) {
    auto m = parse(std::string_view(text).substr(0, n), "cut.ptx");
    if (!m) {
      EXPECT_TRUE(m.error().message.starts_with("cut.ptx:")) << m.error().message;
    }
  }
}

TEST(PtxParser, ByteFlipsNeverCrash) {
  std::string text = k_everything;
  uint64_t seed = 12345;
  int errors = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      t[(seed >> 33) % t.size()] = char(seed >> 13);
    }
    auto m = parse(t, "flip.ptx");
    if (!m) {
      ++errors;
      EXPECT_TRUE(m.error().message.starts_with("flip.ptx:")) << m.error().message;
    } else {
      // whatever parses must print and re-parse to the same IR
      auto again = parse(print(*m), "again.ptx");
      ASSERT_TRUE(again.has_value()) << again.error().message << "\n" << print(*m);
      EXPECT_TRUE(*again == *m);
    }
  }
  EXPECT_GT(errors, 0);
}
