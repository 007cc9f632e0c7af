// Floating-point forms: f32, f64 and half precision, their rounding and special values. Each is
// the interpreter's expression for its form (emu/exec_interp.cpp: exec_arith, exec_half,
// exec_convert) with the semantics functions it calls (emu/semantics.hpp) written out: host IEEE
// operations in round-to-nearest, which the executor's floating-point environment guarantees, and
// the same NaN canonicalization, flushing and saturation. Directed rounding, .approx
// transcendentals and f64 arithmetic stay the helper's.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

namespace {

bool is_float_type(PType t) {
  return t == PType::f16 || t == PType::bf16 || t == PType::f32 || t == PType::f64;
}

} // namespace

// ---- f32 ------------------------------------------------------------------------------------

llvm::Value* Gen::f32_result(llvm::Value* f) {
  llvm::Value* bits = B.CreateBitCast(f, v32);
  llvm::Value* nan = B.CreateFCmpUNO(f, f);
  return B.CreateZExt(B.CreateSelect(nan, splat32(0x7fffffffu), bits), v64);
}

// flush_f32(): a subnormal becomes a zero of its sign.
llvm::Value* Gen::flush_f32(llvm::Value* f) {
  llvm::Value* bits = B.CreateBitCast(f, v32);
  llvm::Value* sub = B.CreateICmpEQ(B.CreateAnd(bits, splat32(0x7f800000u)), splat32(0));
  return B.CreateBitCast(B.CreateSelect(sub, B.CreateAnd(bits, splat32(0x80000000u)), bits), vf32);
}

// finish_f32(): .ftz, then .sat (NaN and everything not above 0 to +0, above 1 to 1), then the
// canonical NaN; as 64-bit lanes.
llvm::Value* Gen::finish_f32(llvm::Value* f, bool ftz, bool sat) {
  if (ftz) f = flush_f32(f);
  if (sat) {
    llvm::Value* zero = llvm::ConstantFP::get(vf32, 0.0);
    llvm::Value* one = llvm::ConstantFP::get(vf32, 1.0);
    f = B.CreateSelect(B.CreateFCmpOGT(f, zero), B.CreateSelect(B.CreateFCmpOGT(f, one), one, f), zero);
  }
  return f32_result(f);
}

llvm::Value* Gen::f32_operand(const Src& s, bool ftz) {
  llvm::Value* f = as_f32(src(s));
  return ftz ? flush_f32(f) : f;
}

// min/max{.ftz}{.NaN}{.xorsign.abs}.f32: sem::detail::minmax_f32.
llvm::Value* Gen::minmax_f32(const Insn& in) {
  const bool ftz = in.flags & k_f_ftz;
  const bool nan_wins = in.flags & k_f_nan;
  const bool xorsign = in.flags & k_f_xorsign;
  const bool is_max = in.op == XOp::max;
  llvm::Value* a = f32_operand(in.src[0], ftz);
  llvm::Value* b = f32_operand(in.src[1], ftz);
  llvm::Value* ab = B.CreateBitCast(a, v32);
  llvm::Value* bb = B.CreateBitCast(b, v32);
  llvm::Value* xs = B.CreateAnd(B.CreateXor(ab, bb), splat32(0x80000000u));
  if (xorsign) {
    ab = B.CreateAnd(ab, splat32(0x7fffffffu));
    bb = B.CreateAnd(bb, splat32(0x7fffffffu));
    a = B.CreateBitCast(ab, vf32);
    b = B.CreateBitCast(bb, vf32);
  }
  llvm::Value* na = B.CreateFCmpUNO(a, a);
  llvm::Value* nb = B.CreateFCmpUNO(b, b);
  // max_num: a > b ? a : b > a ? b : signbit(a) ? b : a; min_num: a < b ? a : b < a ? b :
  // signbit(a) ? a : b
  llvm::Value* a_neg = B.CreateICmpSLT(ab, splat32(0));
  llvm::Value* d;
  if (is_max) {
    d = B.CreateSelect(B.CreateFCmpOGT(a, b), ab,
                       B.CreateSelect(B.CreateFCmpOGT(b, a), bb, B.CreateSelect(a_neg, bb, ab)));
  } else {
    d = B.CreateSelect(B.CreateFCmpOLT(a, b), ab,
                       B.CreateSelect(B.CreateFCmpOLT(b, a), bb, B.CreateSelect(a_neg, ab, bb)));
  }
  d = B.CreateSelect(na, bb, B.CreateSelect(nb, ab, d)); // one NaN: the other operand
  if (xorsign) d = B.CreateOr(B.CreateAnd(d, splat32(0x7fffffffu)), xs);
  llvm::Value* canonical = nan_wins ? B.CreateOr(na, nb) : B.CreateAnd(na, nb);
  return B.CreateZExt(B.CreateSelect(canonical, splat32(0x7fffffffu), d), v64);
}

llvm::Value* Gen::emit_f32(const Insn& in) {
  const bool ftz = in.flags & k_f_ftz;
  const bool sat = in.flags & k_f_sat;
  auto op = [&](int i) { return f32_operand(in.src[i], ftz); };
  switch (in.op) {
  case XOp::add: return finish_f32(B.CreateFAdd(op(0), op(1)), ftz, sat);
  case XOp::sub: return finish_f32(B.CreateFSub(op(0), op(1)), ftz, sat);
  case XOp::mul: return finish_f32(B.CreateFMul(op(0), op(1)), ftz, sat);
  case XOp::fma: {
    llvm::Function* fma = llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::fma, {vf32});
    return finish_f32(B.CreateCall(fma, {op(0), op(1), op(2)}), ftz, sat);
  }
  case XOp::div: {
    llvm::Value* q;
    if (in.flags & k_f_approx) {
      // a * rcp(b), the reciprocal flushed whatever .ftz says (sem::div_approx_f32)
      llvm::Value* rcp = flush_f32(B.CreateFDiv(llvm::ConstantFP::get(vf32, 1.0), op(1)));
      q = finish_f32(B.CreateFMul(op(0), rcp), ftz, false);
    } else {
      q = finish_f32(B.CreateFDiv(op(0), op(1)), ftz, false);
    }
    if (sat) {
      // NaN to 0, then std::clamp(q, 0, 1), which keeps -0
      llvm::Value* f = as_f32(q);
      llvm::Value* zero = llvm::ConstantFP::get(vf32, 0.0);
      llvm::Value* one = llvm::ConstantFP::get(vf32, 1.0);
      f = B.CreateSelect(B.CreateFCmpOLT(f, zero), zero, B.CreateSelect(B.CreateFCmpOLT(one, f), one, f));
      f = B.CreateSelect(B.CreateFCmpUNO(f, f), zero, f);
      q = B.CreateZExt(B.CreateBitCast(f, v32), v64);
    }
    return q;
  }
  case XOp::rcp:
    return finish_f32(B.CreateFDiv(llvm::ConstantFP::get(vf32, 1.0), op(0)), ftz, false);
  case XOp::sqrt: {
    llvm::Function* sqrt = llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::sqrt, {vf32});
    return finish_f32(B.CreateCall(sqrt, {op(0)}), ftz, false);
  }
  case XOp::rsqrt: {
    // sem::rsqrt_approx_f32: float(1 / sqrt(double(a))), NaN for NaN and negatives, +-inf for +-0
    llvm::Value* a = op(0);
    llvm::Function* sqrt = llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::sqrt, {vf64});
    llvm::Value* d = B.CreateFDiv(llvm::ConstantFP::get(vf64, 1.0),
                                  B.CreateCall(sqrt, {B.CreateFPExt(a, vf64)}));
    llvm::Value* r = as_f32(finish_f32(B.CreateFPTrunc(d, vf32), ftz, false));
    llvm::Value* bits = B.CreateBitCast(a, v32);
    llvm::Value* inf = B.CreateBitCast(B.CreateOr(bits, splat32(0x7f800000u)), vf32);
    llvm::Value* zero = llvm::ConstantFP::get(vf32, 0.0);
    r = B.CreateSelect(B.CreateFCmpOEQ(a, zero), inf, r);
    llvm::Value* nan = B.CreateBitCast(splat32(0x7fffffffu), vf32);
    r = B.CreateSelect(B.CreateOr(B.CreateFCmpUNO(a, a), B.CreateFCmpOLT(a, zero)), nan, r);
    return B.CreateZExt(B.CreateBitCast(r, v32), v64);
  }
  case XOp::abs:
    return B.CreateZExt(B.CreateAnd(B.CreateBitCast(op(0), v32), splat32(0x7fffffffu)), v64);
  case XOp::neg:
    return B.CreateZExt(B.CreateXor(B.CreateBitCast(op(0), v32), splat32(0x80000000u)), v64);
  case XOp::min:
  case XOp::max:
    return minmax_f32(in);
  case XOp::testp: {
    llvm::Value* mag = B.CreateAnd(narrow(src(in.src[0]), 32), splat32(0x7fffffffu));
    return B.CreateZExt(testp(mag, 0x7f800000u, 0x00800000u, in.mode, v32), v64);
  }
  case XOp::copysign:
    return B.CreateOr(B.CreateAnd(src(in.src[1]), splat(0x7fffffffu)),
                      B.CreateAnd(src(in.src[0]), splat(0x80000000u)));
  default:
    return splat(0);
  }
}

// The function at `helper` in the Helpers, called for each lane of `exec` in lane order: vector
// arguments give each call their lane's element, scalars are passed as they are. The results as
// a vector (lanes outside exec 0).
llvm::Value* Gen::per_lane(size_t helper, llvm::FunctionType* type,
                           const std::vector<llvm::Value*>& args, llvm::Value* exec) {
  llvm::Value* fn = B.CreateLoad(type->getPointerTo(),
                                 B.CreateBitCast(B.CreateConstInBoundsGEP1_64(i8, helpers_table, helper),
                                                 type->getPointerTo()->getPointerTo()));
  llvm::VectorType* result = vec(type->getReturnType());
  llvm::BasicBlock* entry = B.GetInsertBlock();
  auto* loop = llvm::BasicBlock::Create(C, "", F);
  auto* body = llvm::BasicBlock::Create(C, "", F);
  auto* done = llvm::BasicBlock::Create(C, "", F);
  B.CreateBr(loop);
  B.SetInsertPoint(loop);
  llvm::PHINode* left = B.CreatePHI(i32, 2);
  llvm::PHINode* out = B.CreatePHI(result, 2);
  left->addIncoming(exec, entry);
  out->addIncoming(llvm::Constant::getNullValue(result), entry);
  B.CreateCondBr(B.CreateICmpEQ(left, B.getInt32(0)), done, body);
  B.SetInsertPoint(body);
  llvm::Value* l = B.CreateBinaryIntrinsic(llvm::Intrinsic::cttz, left, B.getTrue());
  std::vector<llvm::Value*> lane_args;
  for (llvm::Value* a : args)
    lane_args.push_back(a->getType()->isVectorTy() ? B.CreateExtractElement(a, l) : a);
  llvm::Value* r = B.CreateCall(type, fn, lane_args);
  left->addIncoming(B.CreateAnd(left, B.CreateSub(left, B.getInt32(1))), body);
  out->addIncoming(B.CreateInsertElement(out, r, l), body);
  B.CreateBr(loop);
  B.SetInsertPoint(done);
  return out;
}

// A host math function (Helpers offset `helper`) of each lane in `exec`, on doubles.
llvm::Value* Gen::call_math(size_t helper, llvm::Value* x, llvm::Value* exec) {
  return per_lane(helper, llvm::FunctionType::get(B.getDoubleTy(), {B.getDoubleTy()}, false), {x}, exec);
}

// Arithmetic in a directed rounding mode: Helpers::f32_directed / f64_directed per lane.
llvm::Value* Gen::emit_directed(const Insn& in, llvm::Value* exec) {
  const bool f64 = in.type == PType::f64;
  const uint32_t form = uint32_t(in.op) | uint32_t(in.mode) << 8 |
                        uint32_t((in.flags & k_f_ftz) != 0) << 16 | uint32_t((in.flags & k_f_sat) != 0) << 17;
  llvm::IntegerType* et = f64 ? i64 : i32;
  std::vector<llvm::Value*> args{B.getInt32(form)};
  for (int i = 0; i < 3; ++i) {
    llvm::Value* v = i < in.nsrc ? src(in.src[i]) : splat(0);
    args.push_back(f64 ? v : narrow(v, 32));
  }
  llvm::FunctionType* type = llvm::FunctionType::get(et, {i32, et, et, et}, false);
  llvm::Value* r = per_lane(f64 ? offsetof(Helpers, f64_directed) : offsetof(Helpers, f32_directed),
                            type, args, exec);
  return f64 ? r : B.CreateZExt(r, v64);
}

// sem::ex2/lg2/sin/cos/tanh_approx_f32: the host function on the double, rounded to f32.
llvm::Value* Gen::emit_f32_approx(const Insn& in, llvm::Value* exec) {
  const bool ftz = in.flags & k_f_ftz && in.op != XOp::tanh;
  llvm::Value* a = f32_operand(in.src[0], ftz);
  size_t helper = offsetof(Helpers, exp2);
  switch (in.op) {
  case XOp::lg2: helper = offsetof(Helpers, log2); break;
  case XOp::sin: helper = offsetof(Helpers, sin); break;
  case XOp::cos: helper = offsetof(Helpers, cos); break;
  case XOp::tanh: helper = offsetof(Helpers, tanh); break;
  default: break;
  }
  llvm::Value* r = B.CreateFPTrunc(call_math(helper, B.CreateFPExt(a, vf64), exec), vf32);
  if (in.op == XOp::lg2) {
    // +-0 -> -inf
    llvm::Value* zero = B.CreateFCmpOEQ(a, llvm::ConstantFP::get(vf32, 0.0));
    r = B.CreateSelect(zero, llvm::ConstantFP::getInfinity(vf32, true), r);
  }
  return finish_f32(r, ftz, false);
}

// sem::testp_bits on the magnitudes `mag` (vectors of `type`).
llvm::Value* Gen::testp(llvm::Value* mag, uint64_t inf, uint64_t min_normal, uint8_t op,
                        llvm::VectorType* type) {
  auto c = [&](uint64_t v) {
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                          llvm::ConstantInt::get(type->getElementType(), v));
  };
  switch (op) { // sem::TestOp
  case 0: return B.CreateICmpULT(mag, c(inf));  // finite
  case 1: return B.CreateICmpEQ(mag, c(inf));   // infinite
  case 2: return B.CreateICmpULE(mag, c(inf));  // number
  case 3: return B.CreateICmpUGT(mag, c(inf));  // notanumber
  case 4:                                       // normal (+-0 included, as the ISA says)
    return B.CreateOr(B.CreateICmpEQ(mag, c(0)),
                      B.CreateAnd(B.CreateICmpUGE(mag, c(min_normal)), B.CreateICmpULT(mag, c(inf))));
  default:                                      // subnormal
    return B.CreateAnd(B.CreateICmpNE(mag, c(0)), B.CreateICmpULT(mag, c(min_normal)));
  }
}

// ---- f64 ------------------------------------------------------------------------------------

// sem::detail::propagate_f64: a NaN result becomes the first NaN operand, quieted, else the
// default NaN.
llvm::Value* Gen::propagate_f64(llvm::Value* r, std::initializer_list<llvm::Value*> operands) {
  llvm::Value* nan = splat(0xfff8000000000000ull);
  std::vector<llvm::Value*> ops(operands);
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    llvm::Value* bits = B.CreateBitCast(*it, v64);
    nan = B.CreateSelect(B.CreateFCmpUNO(*it, *it), B.CreateOr(bits, splat(1ull << 51)), nan);
  }
  return B.CreateSelect(B.CreateFCmpUNO(r, r), nan, B.CreateBitCast(r, v64));
}

llvm::Value* Gen::emit_f64(const Insn& in) {
  auto op = [&](int i) { return B.CreateBitCast(src(in.src[i]), vf64); };
  switch (in.op) {
  case XOp::add: {
    llvm::Value* a = op(0);
    llvm::Value* b = op(1);
    return propagate_f64(B.CreateFAdd(a, b), {a, b});
  }
  case XOp::sub: { // add(a, -b)
    llvm::Value* a = op(0);
    llvm::Value* b = B.CreateFNeg(op(1));
    return propagate_f64(B.CreateFAdd(a, b), {a, b});
  }
  case XOp::mul: {
    llvm::Value* a = op(0);
    llvm::Value* b = op(1);
    return propagate_f64(B.CreateFMul(a, b), {a, b});
  }
  case XOp::div: {
    llvm::Value* a = op(0);
    llvm::Value* b = op(1);
    return propagate_f64(B.CreateFDiv(a, b), {a, b});
  }
  case XOp::rcp: {
    llvm::Value* one = llvm::ConstantFP::get(vf64, 1.0);
    llvm::Value* a = op(0);
    return propagate_f64(B.CreateFDiv(one, a), {one, a});
  }
  case XOp::fma: {
    llvm::Value* a = op(0);
    llvm::Value* b = op(1);
    llvm::Value* c = op(2);
    llvm::Function* fma = llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::fma, {vf64});
    return propagate_f64(B.CreateCall(fma, {a, b, c}), {a, b, c});
  }
  case XOp::sqrt: {
    llvm::Value* a = op(0);
    llvm::Function* sqrt = llvm::Intrinsic::getDeclaration(M.get(), llvm::Intrinsic::sqrt, {vf64});
    return propagate_f64(B.CreateCall(sqrt, {a}), {a});
  }
  case XOp::min:
  case XOp::max: {
    // sem::min_f64 / max_f64: one NaN gives the other operand, two the first, quieted
    llvm::Value* a = op(0);
    llvm::Value* b = op(1);
    llvm::Value* ab = B.CreateBitCast(a, v64);
    llvm::Value* bb = B.CreateBitCast(b, v64);
    llvm::Value* na = B.CreateFCmpUNO(a, a);
    llvm::Value* nb = B.CreateFCmpUNO(b, b);
    llvm::Value* a_neg = B.CreateICmpSLT(ab, splat(0));
    llvm::Value* d;
    if (in.op == XOp::max) {
      d = B.CreateSelect(B.CreateFCmpOGT(a, b), ab,
                         B.CreateSelect(B.CreateFCmpOGT(b, a), bb, B.CreateSelect(a_neg, bb, ab)));
    } else {
      d = B.CreateSelect(B.CreateFCmpOLT(a, b), ab,
                         B.CreateSelect(B.CreateFCmpOLT(b, a), bb, B.CreateSelect(a_neg, ab, bb)));
    }
    d = B.CreateSelect(nb, ab, d);
    return B.CreateSelect(na, B.CreateSelect(nb, B.CreateOr(ab, splat(1ull << 51)), bb), d);
  }
  default:
    return splat(0);
  }
}

// ---- half precision -------------------------------------------------------------------------

// f16_to_f32 / bf16_to_f32 of 16-bit lanes, exact: sem's bit construction (no conversion
// instruction the host may lack). A NaN keeps no particular payload: every caller canonicalizes.
llvm::Value* Gen::half_to_float(llvm::Value* h16, bool bf) {
  llvm::Value* h = B.CreateZExt(h16, v32);
  if (bf) return B.CreateBitCast(B.CreateShl(h, splat32(16)), vf32);
  llvm::Value* s = B.CreateShl(B.CreateAnd(h, splat32(0x8000)), splat32(16));
  llvm::Value* e = B.CreateAnd(B.CreateLShr(h, splat32(10)), splat32(0x1f));
  llvm::Value* m = B.CreateAnd(h, splat32(0x3ff));
  llvm::Value* normal = B.CreateOr(B.CreateShl(B.CreateAdd(e, splat32(112)), splat32(23)),
                                   B.CreateShl(m, splat32(13)));
  // subnormal: 2^(p-24) * (m / 2^p), p the top bit of m
  llvm::Value* p = B.CreateSub(splat32(31), B.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, m, B.getFalse()));
  llvm::Value* sub = B.CreateOr(B.CreateShl(B.CreateAdd(p, splat32(103)), splat32(23)),
                                B.CreateAnd(B.CreateShl(m, B.CreateSub(splat32(23), p)), splat32(0x7fffff)));
  llvm::Value* zero_e = B.CreateICmpEQ(e, splat32(0));
  llvm::Value* r = B.CreateSelect(zero_e, B.CreateSelect(B.CreateICmpEQ(m, splat32(0)), splat32(0), sub), normal);
  llvm::Value* special = B.CreateSelect(B.CreateICmpEQ(m, splat32(0)), splat32(0x7f800000u), splat32(0x7fffffffu));
  r = B.CreateSelect(B.CreateICmpEQ(e, splat32(0x1f)), special, r);
  return B.CreateBitCast(B.CreateOr(s, r), vf32);
}

// f32_to_f16_rn / f32_to_bf16_rn: round to nearest even; NaN to 0x7fff. sem's bit arithmetic.
llvm::Value* Gen::float_to_half(llvm::Value* f, bool bf) {
  llvm::Value* u = B.CreateBitCast(f, v32);
  llvm::Value* a = B.CreateAnd(u, splat32(0x7fffffffu));
  llvm::Value* nan = B.CreateICmpUGT(a, splat32(0x7f800000u));
  if (bf) {
    llvm::Value* lsb = B.CreateAnd(B.CreateLShr(u, splat32(16)), splat32(1));
    llvm::Value* h = B.CreateLShr(B.CreateAdd(B.CreateAdd(u, splat32(0x7fff)), lsb), splat32(16));
    return B.CreateTrunc(B.CreateSelect(nan, splat32(0x7fff), h), v16);
  }
  llvm::Value* s = B.CreateAnd(B.CreateLShr(u, splat32(16)), splat32(0x8000));
  llvm::Value* lsb = B.CreateAnd(B.CreateLShr(a, splat32(13)), splat32(1));
  llvm::Value* normal = B.CreateLShr(B.CreateSub(B.CreateAdd(a, B.CreateAdd(splat32(0xfff), lsb)),
                                                 splat32(0x38000000u)),
                                     splat32(13));
  // subnormal: value = sig * 2^(e-150), in units of 2^-24: sig >> (126 - e)
  llvm::Value* e = B.CreateLShr(a, splat32(23));
  llvm::Value* sig = B.CreateOr(B.CreateAnd(a, splat32(0x7fffff)), splat32(0x800000));
  llvm::Value* shift = B.CreateSub(splat32(126), e);
  shift = B.CreateSelect(B.CreateICmpUGT(shift, splat32(31)), splat32(31), shift);
  llvm::Value* m = B.CreateLShr(sig, shift);
  llvm::Value* half = B.CreateShl(splat32(1), B.CreateSub(shift, splat32(1)));
  llvm::Value* rem = B.CreateAnd(sig, B.CreateSub(B.CreateShl(half, splat32(1)), splat32(1)));
  llvm::Value* up = B.CreateOr(B.CreateICmpUGT(rem, half),
                               B.CreateAnd(B.CreateICmpEQ(rem, half),
                                           B.CreateICmpNE(B.CreateAnd(m, splat32(1)), splat32(0))));
  llvm::Value* sub = B.CreateAdd(m, B.CreateZExt(up, v32));
  llvm::Value* r = B.CreateSelect(B.CreateICmpUGE(a, splat32(0x38800000u)), normal, sub);
  r = B.CreateSelect(B.CreateICmpULE(a, splat32(0x33000000u)), splat32(0), r);
  r = B.CreateSelect(B.CreateICmpUGE(a, splat32(0x477ff000u)), splat32(0x7c00), r);
  r = B.CreateSelect(nan, splat32(0x7fff), B.CreateOr(r, s));
  return B.CreateTrunc(r, v16);
}

// A double rounded to the nearest f16 (ties to even); NaN to 0x7fff. Exactly the rounding of
// sem::round_to_format, written on the double's bits.
llvm::Value* Gen::double_to_f16(llvm::Value* d) {
  llvm::Value* bits = B.CreateBitCast(d, v64);
  llvm::Value* sign = B.CreateTrunc(B.CreateLShr(bits, splat(48)), v16);
  sign = B.CreateAnd(sign, splat16(0x8000));
  llvm::Value* a = B.CreateAnd(bits, splat(0x7fffffffffffffffull));
  // normal results: keep 10 fraction bits of 52, rounding the 42 dropped ones to even
  llvm::Value* lsb = B.CreateAnd(B.CreateLShr(a, splat(42)), splat(1));
  llvm::Value* rounded = B.CreateAdd(a, B.CreateAdd(splat((1ull << 41) - 1), lsb));
  llvm::Value* normal = B.CreateLShr(B.CreateSub(rounded, splat(0x3f00000000000000ull)), splat(42));
  // subnormal results: value = sig * 2^(e - 1075), in units of 2^-24: sig >> (1051 - e)
  llvm::Value* e = B.CreateLShr(a, splat(52));
  llvm::Value* sig = B.CreateOr(B.CreateAnd(a, splat((1ull << 52) - 1)), splat(1ull << 52));
  llvm::Value* shift = B.CreateSub(splat(1051), e);
  shift = B.CreateSelect(B.CreateICmpUGT(shift, splat(63)), splat(63), shift);
  llvm::Value* m = B.CreateLShr(sig, shift);
  llvm::Value* half = B.CreateShl(splat(1), B.CreateSub(shift, splat(1)));
  llvm::Value* rem = B.CreateAnd(sig, B.CreateSub(B.CreateShl(half, splat(1)), splat(1)));
  llvm::Value* up = B.CreateOr(B.CreateICmpUGT(rem, half),
                               B.CreateAnd(B.CreateICmpEQ(rem, half),
                                           B.CreateICmpNE(B.CreateAnd(m, splat(1)), splat(0))));
  llvm::Value* sub = B.CreateAdd(m, B.CreateZExt(up, v64));
  llvm::Value* r = B.CreateSelect(B.CreateICmpUGE(a, splat(0x3f10000000000000ull)), normal, sub); // 2^-14
  r = B.CreateSelect(B.CreateICmpULE(a, splat(0x3e60000000000000ull)), splat(0), r);              // 2^-25 and below
  r = B.CreateSelect(B.CreateICmpUGE(a, splat(0x40effe0000000000ull)), splat(0x7c00), r);         // 65520 and above
  llvm::Value* h = B.CreateOr(B.CreateTrunc(r, v16), sign);
  return B.CreateSelect(B.CreateICmpUGT(a, splat(0x7ff0000000000000ull)), splat16(0x7fff), h);
}

llvm::Value* Gen::flush_half(llvm::Value* h, bool bf) {
  llvm::Value* exp = B.CreateAnd(h, splat16(bf ? 0x7f80 : 0x7c00));
  return B.CreateSelect(B.CreateICmpEQ(exp, splat16(0)), B.CreateAnd(h, splat16(0x8000)), h);
}

llvm::Value* Gen::is_nan_half(llvm::Value* h, bool bf) {
  return B.CreateICmpUGT(B.CreateAnd(h, splat16(0x7fff)), splat16(bf ? 0x7f80 : 0x7c00));
}

// finish_f16 / finish_bf16.
llvm::Value* Gen::finish_half(llvm::Value* h, bool bf, bool ftz, bool sat, bool relu) {
  llvm::Value* nan = is_nan_half(h, bf);
  if (bf) {
    if (relu) h = B.CreateSelect(B.CreateICmpSLT(h, splat16(0)), splat16(0), h);
    return B.CreateSelect(nan, splat16(0x7fff), h);
  }
  if (ftz) {
    h = flush_half(h, false);
    nan = is_nan_half(h, false);
  }
  llvm::Value* negative = B.CreateICmpSLT(h, splat16(0));
  if (sat) {
    h = B.CreateSelect(negative, splat16(0),
                       B.CreateSelect(B.CreateICmpUGT(h, splat16(0x3c00)), splat16(0x3c00), h));
    return B.CreateSelect(nan, splat16(0), h);
  }
  if (relu) h = B.CreateSelect(negative, splat16(0), h);
  return B.CreateSelect(nan, splat16(0x7fff), h);
}

// One 16-bit element of a half operation (exec_half's `one`), on 16-bit lanes.
llvm::Value* Gen::half_element(const Insn& in, llvm::Value* a, llvm::Value* b, llvm::Value* c) {
  const bool bf = in.type == PType::bf16 || in.type == PType::bf16x2;
  const bool ftz = (in.flags & k_f_ftz) && !bf;
  const bool sat = (in.flags & k_f_sat) && !bf;
  const bool relu = in.flags & k_f_relu;
  if (ftz) {
    a = flush_half(a, false);
    if (b) b = flush_half(b, false);
    if (c) c = flush_half(c, false);
  }
  switch (in.op) {
  case XOp::add:
  case XOp::sub:
  case XOp::mul: {
    if (in.op == XOp::sub) b = B.CreateXor(b, splat16(0x8000));
    llvm::Value* fa = half_to_float(a, bf);
    llvm::Value* fb = half_to_float(b, bf);
    llvm::Value* r = in.op == XOp::mul ? B.CreateFMul(fa, fb) : B.CreateFAdd(fa, fb);
    return finish_half(float_to_half(r, bf), bf, ftz, sat, false);
  }
  case XOp::fma: {
    // f16 only: a*b is exact in double and rounding a*b+c to double first, then to f16,
    // rounds as once (f16's exponents keep the sum within reach of double's 53 bits)
    llvm::Value* da = B.CreateFPExt(half_to_float(a, false), vf64);
    llvm::Value* db = B.CreateFPExt(half_to_float(b, false), vf64);
    llvm::Value* dc = B.CreateFPExt(half_to_float(c, false), vf64);
    return finish_half(double_to_f16(B.CreateFAdd(B.CreateFMul(da, db), dc)), false, ftz, sat, relu);
  }
  case XOp::neg:
    return B.CreateXor(a, splat16(0x8000));
  case XOp::abs:
    return B.CreateAnd(a, splat16(0x7fff));
  case XOp::min:
  case XOp::max: {
    // sem::detail::minmax_h
    const bool is_max = in.op == XOp::max;
    llvm::Value* xs = B.CreateAnd(B.CreateXor(a, b), splat16(0x8000));
    if (in.flags & k_f_xorsign) {
      a = B.CreateAnd(a, splat16(0x7fff));
      b = B.CreateAnd(b, splat16(0x7fff));
    }
    llvm::Value* na = is_nan_half(a, bf);
    llvm::Value* nb = is_nan_half(b, bf);
    llvm::Value* fa = half_to_float(a, bf);
    llvm::Value* fb = half_to_float(b, bf);
    llvm::Value* a_neg = B.CreateICmpSLT(a, splat16(0));
    llvm::Value* equal = is_max ? B.CreateSelect(a_neg, b, a) : B.CreateSelect(a_neg, a, b);
    llvm::Value* less = B.CreateFCmpOLT(fa, fb);
    llvm::Value* pick_a = is_max ? B.CreateNot(less) : less;
    llvm::Value* d = B.CreateSelect(B.CreateFCmpOEQ(fa, fb), equal, B.CreateSelect(pick_a, a, b));
    d = B.CreateSelect(na, b, B.CreateSelect(nb, a, d));
    if (in.flags & k_f_xorsign) d = B.CreateOr(B.CreateAnd(d, splat16(0x7fff)), xs);
    llvm::Value* canonical = (in.flags & k_f_nan) ? B.CreateOr(na, nb) : B.CreateAnd(na, nb);
    return B.CreateSelect(canonical, splat16(0x7fff), d);
  }
  default:
    return splat16(0);
  }
}

// exec_half for one destination: each 16-bit element of the (possibly packed) operands.
llvm::Value* Gen::emit_half(const Insn& in) {
  const int n = (in.type == PType::f16x2 || in.type == PType::bf16x2) ? 2 : 1;
  llvm::Value* a = src(in.src[0]);
  llvm::Value* b = in.nsrc > 1 ? src(in.src[1]) : nullptr;
  llvm::Value* c = in.nsrc > 2 ? src(in.src[2]) : nullptr;
  llvm::Value* out = splat(0);
  for (int e = 0; e < n; ++e) {
    auto part = [&](llvm::Value* v) {
      return v ? B.CreateTrunc(B.CreateLShr(v, splat(16 * e)), v16) : splat16(0);
    };
    llvm::Value* r = half_element(in, part(a), part(b), part(c));
    out = B.CreateOr(out, B.CreateShl(B.CreateZExt(r, v64), splat(16 * e)));
  }
  return out;
}

// ---- conversions ----------------------------------------------------------------------------

// sem::cvt between floating-point types and from floating point to integers, for the forms
// written here (convert_form()).
llvm::Value* Gen::emit_float_convert(const Insn& in) {
  const PType dt = in.type, st = in.type2;
  const bool ftz = in.flags & k_f_ftz;
  llvm::Value* v = src(in.src[0]);
  auto canon64 = [&](llvm::Value* f32) { return f32_result(f32); };
  if (is_integer(st)) {
    // int to float, round to nearest
    const IntInfo s = int_info(st);
    llvm::Value* x = narrow(v, s.width);
    llvm::VectorType* ft = dt == PType::f64 ? vf64 : vf32;
    llvm::Value* f = s.is_signed ? B.CreateSIToFP(x, ft) : B.CreateUIToFP(x, ft);
    return dt == PType::f64 ? B.CreateBitCast(f, v64) : B.CreateZExt(B.CreateBitCast(f, v32), v64);
  }
  // the source as float or double
  llvm::Value* f = nullptr;
  switch (st) {
  case PType::f16: f = half_to_float(B.CreateTrunc(v, v16), false); break;
  case PType::bf16: f = half_to_float(B.CreateTrunc(v, v16), true); break;
  case PType::f32: f = as_f32(v); if (ftz) f = flush_f32(f); break;
  default: f = B.CreateBitCast(v, vf64); break;
  }
  const uint8_t mode = in.mode; // RoundMode numbering (sem::CvtMode)
  if (is_integer(dt)) {
    // round to an integer in the mode, then saturate; NaN is 0 from f32 to narrower than 64
    // bits, else the most negative value's bits
    llvm::Intrinsic::ID round = llvm::Intrinsic::trunc;
    if (mode == k_rnd_rn || mode == k_rnd_rni) round = llvm::Intrinsic::roundeven;
    else if (mode == k_rnd_rm || mode == k_rnd_rmi) round = llvm::Intrinsic::floor;
    else if (mode == k_rnd_rp || mode == k_rnd_rpi) round = llvm::Intrinsic::ceil;
    llvm::Value* r = B.CreateUnaryIntrinsic(round, f);
    const IntInfo d = int_info(dt);
    llvm::Type* it = vec(B.getIntNTy(d.width));
    llvm::Value* x = B.CreateIntrinsic(
        d.is_signed ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat, {it, r->getType()}, {r});
    x = widen(x, d.is_signed);
    if (st == PType::f64 || d.width == 64) {
      const uint64_t top = 1ull << (d.width - 1);
      const uint64_t nan = d.is_signed && d.width < 64 ? (~0ull << (d.width - 1)) : top;
      x = B.CreateSelect(B.CreateFCmpUNO(f, f), splat(nan), x);
    }
    return x;
  }
  if (dt == PType::f64) { // from f32 (exact) or f64 (to an integral value)
    llvm::Value* d = st == PType::f64 ? f : B.CreateFPExt(f, vf64);
    if (st == PType::f64) {
      // to an integral value (cvt.rni.f64.f64 ...); a NaN stays itself, quieted
      llvm::Intrinsic::ID round = llvm::Intrinsic::trunc;
      if (mode == k_rnd_rni) round = llvm::Intrinsic::roundeven;
      else if (mode == k_rnd_rmi) round = llvm::Intrinsic::floor;
      else if (mode == k_rnd_rpi) round = llvm::Intrinsic::ceil;
      d = B.CreateUnaryIntrinsic(round, f);
    }
    // a NaN keeps its sign and payload, quieted (decode_float, to_float)
    llvm::Value* bits = B.CreateBitCast(d, v64);
    llvm::Value* quiet = B.CreateOr(bits, splat(0x0008000000000000ull));
    if (st == PType::f32) {
      llvm::Value* sb = B.CreateZExt(B.CreateBitCast(f, v32), v64);
      quiet = B.CreateOr(B.CreateOr(B.CreateShl(B.CreateAnd(sb, splat(0x80000000u)), splat(32)),
                                    splat(0x7ff8000000000000ull)),
                         B.CreateShl(B.CreateAnd(sb, splat(0x7fffffu)), splat(29)));
    }
    return B.CreateSelect(B.CreateFCmpUNO(f, f), quiet, bits);
  }
  if (dt == PType::f32 && st == PType::f32 && (in.flags & k_f_sat)) {
    // sem::cvt's .sat: NaN and everything with the sign bit to +0, above 1 to 1 (f was flushed
    // for .ftz above)
    llvm::Value* bits = B.CreateBitCast(f, v32);
    llvm::Value* zero = B.CreateOr(B.CreateFCmpUNO(f, f), B.CreateICmpSLT(bits, splat32(0)));
    llvm::Value* r = B.CreateSelect(B.CreateICmpUGT(bits, splat32(0x3f800000u)), splat32(0x3f800000u), bits);
    return B.CreateZExt(B.CreateSelect(zero, splat32(0), r), v64);
  }
  if (dt == PType::f32) {
    if (st == PType::f32) {
      llvm::Intrinsic::ID round = llvm::Intrinsic::trunc;
      if (mode == k_rnd_rni) round = llvm::Intrinsic::roundeven;
      else if (mode == k_rnd_rmi) round = llvm::Intrinsic::floor;
      else if (mode == k_rnd_rpi) round = llvm::Intrinsic::ceil;
      f = B.CreateUnaryIntrinsic(round, f);
    } else if (st == PType::f64) {
      f = B.CreateFPTrunc(f, vf32);
    }
    return canon64(f);
  }
  // to f16 or bf16, round to nearest
  llvm::Value* h = float_to_half(f, dt == PType::bf16);
  return B.CreateZExt(h, v64);
}

// Which cvt forms emit_float_convert() writes: no .sat/.relu/.satfinite, round to nearest when
// the result is narrower or a float made from an integer, integer rounding modes otherwise.
bool Gen::float_convert_form(const Insn& in) const {
  const PType dt = in.type, st = in.type2;
  const uint8_t mode = in.mode;
  // cvt{.ftz}.sat.f32.f32: the clamp to [0, 1]
  if (in.nsrc == 1 && dt == PType::f32 && st == PType::f32 && (in.flags & k_f_sat) &&
      !(in.flags & (k_f_relu | k_f_satfinite)) && (mode == k_rnd_default || mode == k_rnd_rn))
    return true;
  if (in.nsrc != 1 || (in.flags & (k_f_sat | k_f_relu | k_f_satfinite))) return false;
  const bool nearest = mode == k_rnd_default || mode == k_rnd_rn;
  if (is_integer(st)) return (dt == PType::f32 || dt == PType::f64) && nearest && !(in.flags & k_f_ftz);
  if (!is_float_type(st)) return false;
  if (is_integer(dt)) {
    const bool integer_mode = mode == k_rnd_default || mode == k_rnd_rn || mode == k_rnd_rni ||
                              mode == k_rnd_rz || mode == k_rnd_rzi || mode == k_rnd_rm ||
                              mode == k_rnd_rmi || mode == k_rnd_rp || mode == k_rnd_rpi;
    return integer_mode && (st == PType::f32 || st == PType::f64) &&
           (!(in.flags & k_f_ftz) || st == PType::f32);
  }
  if (in.flags & k_f_ftz) return false;
  switch (dt) {
  case PType::f32:
    if (st == PType::f16 || st == PType::bf16) return mode == k_rnd_default;
    if (st == PType::f64) return nearest;
    if (st == PType::f32)
      return mode == k_rnd_rni || mode == k_rnd_rzi || mode == k_rnd_rmi || mode == k_rnd_rpi;
    return false;
  case PType::f64:
    if (st == PType::f32) return mode == k_rnd_default;
    if (st == PType::f64)
      return mode == k_rnd_rni || mode == k_rnd_rzi || mode == k_rnd_rmi || mode == k_rnd_rpi;
    return false;
  case PType::f16:
  case PType::bf16:
    return st == PType::f32 && nearest;
  default:
    return false;
  }
}

} // namespace hone::emu::jit
