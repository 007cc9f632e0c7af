// Integer, logic, comparison and conversion forms, and which forms are lane operations.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

// The forms emit_inline() writes as lane operations: each exactly the interpreter's expression for
// that form (exec_interp.cpp: exec_arith, exec_convert, fast_memory); every other form is the
// helper's.
bool Gen::inline_form(const Insn& in) const {
  if (is_matrix(in.op)) return false; // the interpreter's handler (exec_matrix), for the warp
  const uint32_t f = in.flags;
  if (in.type == PType::f32) {
    // exec_arith's f32 forms in round to nearest (directed rounding and the .approx
    // transcendentals are the helper's)
    switch (in.op) {
    case XOp::add: case XOp::sub: case XOp::mul: case XOp::fma: case XOp::div: case XOp::rcp:
    case XOp::sqrt: // directed rounding: sem's functions per lane
    case XOp::rsqrt: case XOp::abs: case XOp::neg: case XOp::min: case XOp::max:
    case XOp::testp: case XOp::copysign:
      return true;
    case XOp::sin: case XOp::cos: case XOp::lg2: case XOp::ex2: case XOp::tanh:
      return true; // the host's math function per lane, as the interpreter
    default:
      break;
    }
  }
  if (in.type == PType::f64) {
    // exec_arith's f64 forms in round to nearest (rsqrt and rcp.approx are the helper's)
    switch (in.op) {
    case XOp::abs: case XOp::neg: case XOp::testp: case XOp::copysign: case XOp::min:
    case XOp::max:
      return true;
    case XOp::add: case XOp::sub: case XOp::mul: case XOp::fma: case XOp::div: case XOp::sqrt:
      return true; // directed rounding: sem's functions per lane
    case XOp::rcp:
      return !(f & k_f_approx);
    case XOp::rsqrt:
      return false;
    default:
      break;
    }
  }
  if (is_half(in.type)) {
    // exec_half's forms (what execute() sends it); fma of bf16 needs more than double to round
    // once, ex2 and tanh are .approx
    const bool bf = in.type == PType::bf16 || in.type == PType::bf16x2;
    switch (in.op) {
    case XOp::add: case XOp::sub: case XOp::mul: case XOp::neg: case XOp::abs:
    case XOp::min: case XOp::max:
      return true;
    case XOp::fma:
      return !bf;
    case XOp::setp:
      return in.type == PType::f16 || in.type == PType::bf16; // one predicate per operand pair
    case XOp::mov: case XOp::pack: case XOp::unpack: case XOp::selp: case XOp::and_:
    case XOp::or_: case XOp::xor_: case XOp::not_: case XOp::cvt: case XOp::ld: case XOp::st:
      break; // not exec_half's
    default:
      return false;
    }
  }
  switch (in.op) {
  case XOp::nop:
  case XOp::activemask:
  case XOp::shfl:
  case XOp::vote:
  case XOp::match:
  case XOp::redux:
  case XOp::bar_warp:
  case XOp::elect:
    return true;
  case XOp::mov:
    return in.nsrc == 1 && in.ndst == 1;
  case XOp::and_:
  case XOp::or_:
  case XOp::xor_:
  case XOp::not_:
  case XOp::cnot:
    return !is_half(in.type);
  case XOp::selp:
    return true;
  case XOp::cvta:
  case XOp::cvta_to:
    return in.mode <= 3;
  case XOp::add:
  case XOp::sub:
  case XOp::mul:
  case XOp::fma:
  case XOp::mad:
    if (!is_integer(in.type) || in.op == XOp::fma) return false;
    if ((f & k_f_sat) && !(in.op == XOp::add || in.op == XOp::sub)) return false;
    if ((f & k_f_sat) && in.type != PType::s32) return false;
    if ((f & (k_f_cc | k_f_carry_in)) && k.carry_slot == k_no_slot) return false;
    if ((f & k_f_sat) && (f & k_f_cc)) return false;
    if (f & k_f_wide) return !(f & (k_f_cc | k_f_carry_in | k_f_hi)) &&
                             (in.op == XOp::mul || in.op == XOp::mad) && int_info(in.type).width <= 32;
    if ((f & k_f_carry_in) && in.op != XOp::mad) return false;
    return true;
  case XOp::addc:
  case XOp::subc:
    return is_integer(in.type) && k.carry_slot != k_no_slot;
  case XOp::pack:
  case XOp::unpack:
  case XOp::brev:
  case XOp::bfind:
    return is_integer(in.type);
  case XOp::shf:
    return true;
  case XOp::prmt:
    return in.mode == 0; // the default byte selection (sem::PrmtMode::none)
  case XOp::abs:
  case XOp::neg:
    return is_integer(in.type);
  case XOp::min:
  case XOp::max:
    return is_integer(in.type) && !(f & k_f_relu);
  case XOp::shl:
  case XOp::shr:
  case XOp::popc:
  case XOp::clz:
  case XOp::div:
  case XOp::rem:
    return is_integer(in.type);
  case XOp::setp:
    return in.type2 == PType::f32 || in.type2 == PType::f64 || in.type2 == PType::f16 ||
           in.type2 == PType::bf16 || is_integer(in.type2);
  case XOp::cvt:
    if (is_integer(in.type) && is_integer(in.type2))
      return in.nsrc == 1 && !(f & (k_f_sat | k_f_relu | k_f_satfinite));
    return float_convert_form(in);
  case XOp::ld: {
    if (in.addr.space != AddrSpace::kparam || in.addr.slot != k_no_slot || (f & k_f_volatile))
      return false;
    const uint32_t esize = std::max<uint32_t>(ptx::type_size(in.type), 1);
    const uint32_t total = esize * in.vec;
    if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return false;
    const int64_t off = in.addr.offset;
    return off >= 0 && (total == 1 || off % total == 0) && uint64_t(off) + total <= k.param_bytes;
  }
  default:
    return false;
  }
}

// Integer add, sub, mul(.wide), mad(.wide), min, max, shl, shr, abs, neg, popc, clz of in.type.
llvm::Value* Gen::emit_int(const Insn& in) {
  const IntInfo t = int_info(in.type);
  const unsigned W = t.width;
  llvm::Value* a64 = src(in.src[0]);
  llvm::Value* a = narrow(a64, W);
  auto b = [&] { return narrow(src(in.src[1]), W); };
  auto out = [&](llvm::Value* r) { return widen(r, false); }; // ubits(): zero-extended
  switch (in.op) {
  case XOp::add:
  case XOp::sub:
    if (in.flags & k_f_sat) {
      // .sat.s32: the exact result clamped to the range
      llvm::Intrinsic::ID id = in.op == XOp::add ? llvm::Intrinsic::sadd_sat : llvm::Intrinsic::ssub_sat;
      return out(B.CreateBinaryIntrinsic(id, a, b()));
    }
    return out(in.op == XOp::add ? B.CreateAdd(a, b()) : B.CreateSub(a, b()));
  case XOp::mul:
  case XOp::mad: {
    if (in.flags & k_f_wide) {
      // Wd(a) * Wd(b) in 64 bits, then mad adds the whole 64-bit third operand
      llvm::Value* p = B.CreateMul(widen(a, t.is_signed), widen(b(), t.is_signed));
      if (in.op == XOp::mad) p = B.CreateAdd(p, src(in.src[2]));
      return p;
    }
    llvm::Value* p = (in.flags & k_f_hi) ? mul_hi(a, b(), t) : B.CreateMul(a, b());
    if (in.op == XOp::mad) p = B.CreateAdd(p, narrow(src(in.src[2]), W));
    return out(p);
  }
  case XOp::min:
  case XOp::max: {
    llvm::Value* bv = b();
    llvm::Value* lt = t.is_signed ? B.CreateICmpSLT(a, bv) : B.CreateICmpULT(a, bv);
    // std::min(a, b) is b < a ? b : a; std::max(a, b) is a < b ? b : a
    if (in.op == XOp::min) {
      llvm::Value* blt = t.is_signed ? B.CreateICmpSLT(bv, a) : B.CreateICmpULT(bv, a);
      return out(B.CreateSelect(blt, bv, a));
    }
    return out(B.CreateSelect(lt, bv, a));
  }
  case XOp::shl:
  case XOp::shr: {
    llvm::Value* s32 = narrow(src(in.src[1]), 32); // uint32_t(b)
    llvm::Value* s = W == 32 ? s32 : W > 32 ? B.CreateZExt(s32, vec(B.getIntNTy(W)))
                                            : B.CreateTrunc(s32, vec(B.getIntNTy(W)));
    llvm::Value* big = B.CreateICmpUGE(s32, llvm::ConstantVector::getSplat(
                                                llvm::ElementCount::getFixed(k_lanes),
                                                llvm::ConstantInt::get(i32, W)));
    llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
    if (in.op == XOp::shl) return out(B.CreateSelect(big, zero, B.CreateShl(a, s)));
    if (t.is_signed) {
      llvm::Value* top = llvm::ConstantInt::get(a->getType(), W - 1);
      return out(B.CreateAShr(a, B.CreateSelect(big, top, s)));
    }
    return out(B.CreateSelect(big, zero, B.CreateLShr(a, s)));
  }
  case XOp::abs: {
    if (!t.is_signed) return out(a);
    llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
    return out(B.CreateSelect(B.CreateICmpSLT(a, zero), B.CreateSub(zero, a), a));
  }
  case XOp::neg:
    return out(B.CreateSub(llvm::Constant::getNullValue(a->getType()), a));
  case XOp::div:
  case XOp::rem: {
    // sem::div_int / rem_int: x / 0 is all ones (unsigned) or -1, x % 0 is x; signed x / -1 is
    // -x and x % -1 is 0 (no overflow trap for the most negative value)
    llvm::Value* bv = b();
    llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
    llvm::Value* ones = llvm::Constant::getAllOnesValue(a->getType());
    llvm::Value* by_zero = B.CreateICmpEQ(bv, zero);
    llvm::Value* special = by_zero;
    if (t.is_signed) special = B.CreateOr(special, B.CreateICmpEQ(bv, ones));
    // divide by 1 where the answer does not come from the division, so nothing traps
    llvm::Value* safe = B.CreateSelect(special, llvm::ConstantInt::get(a->getType(), 1), bv);
    if (in.op == XOp::div) {
      llvm::Value* q = t.is_signed ? B.CreateSDiv(a, safe) : B.CreateUDiv(a, safe);
      if (t.is_signed) q = B.CreateSelect(B.CreateICmpEQ(bv, ones), B.CreateSub(zero, a), q);
      return out(B.CreateSelect(by_zero, ones, q));
    }
    llvm::Value* r = t.is_signed ? B.CreateSRem(a, safe) : B.CreateURem(a, safe);
    if (t.is_signed) r = B.CreateSelect(B.CreateICmpEQ(bv, ones), zero, r);
    return out(B.CreateSelect(by_zero, a, r));
  }
  case XOp::brev:
    return out(B.CreateUnaryIntrinsic(llvm::Intrinsic::bitreverse, a));
  case XOp::bfind: {
    // sem::bfind: the most significant non-sign bit (.shiftamt: counted from the top), all ones
    // when there is none
    llvm::Value* u = a;
    llvm::Value* zero = llvm::Constant::getNullValue(a->getType());
    if (t.is_signed) u = B.CreateSelect(B.CreateICmpSLT(a, zero), B.CreateNot(a), a);
    llvm::Value* lz = B.CreateZExt(B.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, u, B.getFalse()), v64);
    llvm::Value* d = B.CreateSub(splat(W - 1), lz);
    if (in.flags & k_f_shiftamt) d = lz;
    return B.CreateSelect(B.CreateICmpEQ(u, zero), splat(0xffffffffu), B.CreateAnd(d, splat(0xffffffffu)));
  }
  case XOp::popc:
    return out(B.CreateUnaryIntrinsic(llvm::Intrinsic::ctpop, a));
  case XOp::clz:
    return out(B.CreateBinaryIntrinsic(llvm::Intrinsic::ctlz, a, B.getFalse()));
  default:
    return splat(0);
  }
}

// The high half of the product of a and b (sem::mul_hi_*): through twice the width.
llvm::Value* Gen::mul_hi(llvm::Value* a, llvm::Value* b, const IntInfo& t) {
  llvm::VectorType* wide = vec(B.getIntNTy(2 * t.width));
  llvm::Value* p = B.CreateMul(t.is_signed ? B.CreateSExt(a, wide) : B.CreateZExt(a, wide),
                               t.is_signed ? B.CreateSExt(b, wide) : B.CreateZExt(b, wide));
  return B.CreateTrunc(B.CreateLShr(p, llvm::ConstantInt::get(wide, t.width)), a->getType());
}

// The carry chain (exec_arith): add.cc, sub.cc, addc, subc, and mad{c}.lo/hi{.cc}, which read
// and write the per-thread carry flag in its own register.
void Gen::emit_carry(const Insn& in, llvm::Value* mask) {
  const IntInfo t = int_info(in.type);
  const unsigned W = t.width;
  llvm::Value* a = narrow(src(in.src[0]), W);
  llvm::Value* b = narrow(src(in.src[1]), W);
  llvm::Type* et = a->getType();
  llvm::Value* one = llvm::ConstantInt::get(et, 1);
  Src carry;
  carry.kind = Src::Kind::reg;
  carry.slot = k.carry_slot;
  auto carry_in = [&] { return B.CreateAnd(narrow(load_reg(k.carry_slot), W), one); };
  llvm::Value* r = nullptr;
  llvm::Value* out = nullptr; // the carry out, as <32 x i1>
  switch (in.op) {
  case XOp::add:
    r = B.CreateAdd(a, b);
    out = B.CreateICmpULT(r, a);
    break;
  case XOp::sub:
    r = B.CreateSub(a, b);
    out = B.CreateICmpULT(a, b);
    break;
  case XOp::addc: {
    llvm::Value* cin = carry_in();
    r = B.CreateAdd(B.CreateAdd(a, b), cin);
    out = B.CreateOr(B.CreateICmpULT(r, a),
                     B.CreateAnd(B.CreateICmpNE(cin, llvm::Constant::getNullValue(et)), B.CreateICmpEQ(r, a)));
    break;
  }
  case XOp::subc: {
    llvm::Value* cin = carry_in();
    r = B.CreateSub(B.CreateSub(a, b), cin);
    out = B.CreateOr(B.CreateICmpULT(a, b),
                     B.CreateAnd(B.CreateICmpNE(cin, llvm::Constant::getNullValue(et)), B.CreateICmpEQ(a, b)));
    break;
  }
  default: { // mad
    llvm::Value* p = (in.flags & k_f_hi) ? mul_hi(a, b, t) : B.CreateMul(a, b);
    llvm::Value* c = narrow(src(in.src[2]), W);
    llvm::Value* cin = (in.flags & k_f_carry_in) ? carry_in() : llvm::Constant::getNullValue(et);
    llvm::Value* s1 = B.CreateAdd(p, c);
    r = B.CreateAdd(s1, cin);
    out = B.CreateOr(B.CreateICmpULT(s1, p), B.CreateICmpULT(r, s1));
    break;
  }
  }
  // the carry is written before the destination, lane by lane, as the interpreter does
  if (in.flags & k_f_cc) write(carry, B.CreateZExt(out, v64), mask);
  write(in.dst[0], widen(r, false), mask);
}

// setp's comparison (sem::cmp_int, sem::cmp_float) as <32 x i1>.
llvm::Value* Gen::emit_compare(const Insn& in) {
  using P = llvm::CmpInst::Predicate;
  const auto op = CmpOp(in.mode);
  llvm::Value* a = src(in.src[0]);
  llvm::Value* b = src(in.src[1]);
  const bool half = in.type2 == PType::f16 || in.type2 == PType::bf16;
  if (in.type2 == PType::f32 || in.type2 == PType::f64 || half) {
    const bool ftz = (in.flags & k_f_ftz) && in.type2 != PType::bf16;
    if (half) {
      // cmp_f16 / cmp_bf16: the values as f32
      const bool bf = in.type2 == PType::bf16;
      llvm::Value* ha = B.CreateTrunc(a, v16);
      llvm::Value* hb = B.CreateTrunc(b, v16);
      if (ftz) {
        ha = flush_half(ha, false);
        hb = flush_half(hb, false);
      }
      a = half_to_float(ha, bf);
      b = half_to_float(hb, bf);
    } else if (in.type2 == PType::f32) {
      a = as_f32(a);
      b = as_f32(b);
      if (ftz) {
        a = flush_f32(a);
        b = flush_f32(b);
      }
    } else {
      a = B.CreateBitCast(a, vf64);
      b = B.CreateBitCast(b, vf64);
    }
    P p = P::FCMP_FALSE;
    switch (op) {
    case k_cmp_eq: p = P::FCMP_OEQ; break;
    case k_cmp_ne: p = P::FCMP_ONE; break;
    case k_cmp_lt: case k_cmp_lo: p = P::FCMP_OLT; break;
    case k_cmp_le: case k_cmp_ls: p = P::FCMP_OLE; break;
    case k_cmp_gt: case k_cmp_hi: p = P::FCMP_OGT; break;
    case k_cmp_ge: case k_cmp_hs: p = P::FCMP_OGE; break;
    case k_cmp_equ: p = P::FCMP_UEQ; break;
    case k_cmp_neu: p = P::FCMP_UNE; break;
    case k_cmp_ltu: p = P::FCMP_ULT; break;
    case k_cmp_leu: p = P::FCMP_ULE; break;
    case k_cmp_gtu: p = P::FCMP_UGT; break;
    case k_cmp_geu: p = P::FCMP_UGE; break;
    case k_cmp_num: p = P::FCMP_ORD; break;
    case k_cmp_nan: p = P::FCMP_UNO; break;
    }
    return B.CreateFCmp(p, a, b);
  }
  const IntInfo t = int_info(in.type2);
  a = narrow(a, t.width);
  b = narrow(b, t.width);
  const bool s = t.is_signed;
  P p = P::ICMP_EQ;
  switch (op) {
  case k_cmp_eq: case k_cmp_equ: p = P::ICMP_EQ; break;
  case k_cmp_ne: case k_cmp_neu: p = P::ICMP_NE; break;
  case k_cmp_lt: case k_cmp_ltu: p = s ? P::ICMP_SLT : P::ICMP_ULT; break;
  case k_cmp_le: case k_cmp_leu: p = s ? P::ICMP_SLE : P::ICMP_ULE; break;
  case k_cmp_gt: case k_cmp_gtu: p = s ? P::ICMP_SGT : P::ICMP_UGT; break;
  case k_cmp_ge: case k_cmp_geu: p = s ? P::ICMP_SGE : P::ICMP_UGE; break;
  case k_cmp_lo: p = P::ICMP_ULT; break;
  case k_cmp_ls: p = P::ICMP_ULE; break;
  case k_cmp_hi: p = P::ICMP_UGT; break;
  case k_cmp_hs: p = P::ICMP_UGE; break;
  case k_cmp_num: return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes), B.getTrue());
  case k_cmp_nan: return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes), B.getFalse());
  }
  return B.CreateICmp(p, a, b);
}

void Gen::emit_setp(const Insn& in, llvm::Value* mask) {
  llvm::Value* c = emit_compare(in);
  llvm::Value* nc = B.CreateNot(c);
  llvm::Value* p = c;
  llvm::Value* q = nc;
  if (in.mode2 != k_bool_none) {
    llvm::Value* cc = B.CreateICmpNE(src(in.src[2]), splat(0));
    switch (in.mode2) {
    case k_bool_and: p = B.CreateAnd(c, cc); q = B.CreateAnd(nc, cc); break;
    case k_bool_or: p = B.CreateOr(c, cc); q = B.CreateOr(nc, cc); break;
    case k_bool_xor: p = B.CreateXor(c, cc); q = B.CreateXor(nc, cc); break;
    default: break;
    }
  }
  write(in.dst[0], B.CreateZExt(p, v64), mask);
  if (in.ndst == 2) write(in.dst[1], B.CreateZExt(q, v64), mask);
}

// ld.param at a constant offset inside the parameters: one value, the same in every lane.
void Gen::emit_param_load(const Insn& in, llvm::Value* mask) {
  const uint32_t esize = std::max<uint32_t>(ptx::type_size(in.type), 1);
  const bool sign = ptx::is_signed(in.type);
  llvm::IntegerType* et = B.getIntNTy(esize * 8);
  for (uint32_t e = 0; e < in.vec; ++e) {
    llvm::Value* p = B.CreateBitCast(
        B.CreateConstInBoundsGEP1_64(i8, params, uint64_t(in.addr.offset) + e * esize),
        et->getPointerTo());
    auto* l = B.CreateAlignedLoad(et, p, llvm::Align(1));
    tag(l, m_tbaa_param);
    llvm::Value* v = esize == 8 ? static_cast<llvm::Value*>(l)
                                : sign ? B.CreateSExt(l, i64) : B.CreateZExt(l, i64);
    write(in.dst[e], B.CreateVectorSplat(k_lanes, v), mask);
  }
}

void Gen::emit_inline(const Insn& in, llvm::Value* mask) {
  ++m_inline;
  switch (in.op) {
  case XOp::nop:
  case XOp::bar_warp: // the lanes at one position run together already
    return;
  case XOp::activemask:
  case XOp::shfl:
  case XOp::vote:
  case XOp::match:
  case XOp::redux:
  case XOp::elect:
    emit_warp(in, B.CreateBitCast(mask, i32), mask);
    return;
  case XOp::mov:
    write(in.dst[0], src(in.src[0]), mask);
    return;
  case XOp::and_:
    write(in.dst[0], B.CreateAnd(src(in.src[0]), src(in.src[1])), mask);
    return;
  case XOp::or_:
    write(in.dst[0], B.CreateOr(src(in.src[0]), src(in.src[1])), mask);
    return;
  case XOp::xor_:
    write(in.dst[0], B.CreateXor(src(in.src[0]), src(in.src[1])), mask);
    return;
  case XOp::not_:
    if (in.type == PType::pred) {
      write(in.dst[0], B.CreateZExt(B.CreateICmpEQ(src(in.src[0]), splat(0)), v64), mask);
    } else {
      write(in.dst[0], B.CreateNot(src(in.src[0])), mask);
    }
    return;
  case XOp::cnot:
    write(in.dst[0], B.CreateZExt(B.CreateICmpEQ(src(in.src[0]), splat(0)), v64), mask);
    return;
  case XOp::selp: {
    llvm::Value* c = B.CreateICmpNE(src(in.src[2]), splat(0));
    write(in.dst[0], B.CreateSelect(c, src(in.src[0]), src(in.src[1])), mask);
    return;
  }
  case XOp::cvta:
  case XOp::cvta_to: {
    // exec_convert: into a window (offset 0 included: it is the first variable's address), or
    // out of it
    static constexpr uint64_t windows[4] = {0, k_shared_window, k_local_window, k_param_window};
    const uint64_t win = windows[in.mode];
    const bool narrow32 = in.type == PType::u32 || in.type == PType::b32;
    llvm::Value* a = src(in.src[0]);
    llvm::Value* r = a;
    if (win && in.op == XOp::cvta) {
      r = B.CreateAdd(a, splat(win));
    } else if (win) {
      llvm::Value* inside = B.CreateICmpEQ(B.CreateAnd(a, splat(~(k_window_size - 1))), splat(win));
      r = B.CreateSelect(inside, B.CreateSub(a, splat(win)), a);
    }
    write(in.dst[0], narrow32 ? widen(narrow(r, 32), false) : r, mask);
    return;
  }
  case XOp::setp:
    emit_setp(in, mask);
    return;
  case XOp::cvt: {
    if (!is_integer(in.type) || !is_integer(in.type2)) {
      write(in.dst[0], emit_float_convert(in), mask);
      return;
    }
    const IntInfo s = int_info(in.type2);
    const IntInfo d = int_info(in.type);
    llvm::Value* x = widen(narrow(src(in.src[0]), s.width), s.is_signed);
    write(in.dst[0], widen(narrow(x, d.width), d.is_signed), mask);
    return;
  }
  case XOp::ld:
    emit_param_load(in, mask);
    return;
  case XOp::pack: {
    // mov.b64 d, {a, b}: elements of equal width, lowest first
    const unsigned ew = ptx::type_size(in.type) * 8 / in.nsrc;
    llvm::Value* v = splat(0);
    for (int e = in.nsrc - 1; e >= 0; --e) {
      llvm::Value* part = ew == 64 ? src(in.src[e]) : B.CreateAnd(src(in.src[e]), splat((1ull << ew) - 1));
      v = ew == 64 ? part : B.CreateOr(B.CreateShl(v, splat(ew)), part);
    }
    write(in.dst[0], v, mask);
    return;
  }
  case XOp::unpack: {
    const unsigned ew = ptx::type_size(in.type) * 8 / in.ndst;
    llvm::Value* v = src(in.src[0]);
    for (int e = 0; e < in.ndst; ++e) {
      write(in.dst[e], ew == 64 ? v : B.CreateAnd(v, splat((1ull << ew) - 1)), mask);
      v = ew == 64 ? splat(0) : B.CreateLShr(v, splat(ew));
    }
    return;
  }
  case XOp::shf: {
    // sem::shf_l / shf_r: the amount wraps (& 31) or clamps at 32
    llvm::Value* a = B.CreateZExt(narrow(src(in.src[0]), 32), v64);
    llvm::Value* b = B.CreateZExt(narrow(src(in.src[1]), 32), v64);
    llvm::Value* c = narrow(src(in.src[2]), 32);
    llvm::Value* n = (in.flags & k_f_wrap) ? B.CreateAnd(c, splat32(31))
                                           : B.CreateSelect(B.CreateICmpULT(c, splat32(32)), c, splat32(32));
    llvm::Value* t = B.CreateOr(B.CreateShl(b, splat(32)), a);
    n = B.CreateZExt(n, v64);
    llvm::Value* r = in.mode == 1 ? B.CreateLShr(B.CreateShl(t, n), splat(32)) : B.CreateLShr(t, n);
    write(in.dst[0], B.CreateAnd(r, splat(0xffffffffu)), mask);
    return;
  }
  case XOp::prmt: {
    // sem::prmt, default mode: each result byte picks one of the 8 bytes of {b, a} by a nibble of
    // c, or that byte's sign when the nibble's top bit is set
    llvm::Value* t = B.CreateOr(B.CreateShl(B.CreateAnd(src(in.src[1]), splat(0xffffffffu)), splat(32)),
                                B.CreateAnd(src(in.src[0]), splat(0xffffffffu)));
    llvm::Value* c = src(in.src[2]);
    llvm::Value* d = splat(0);
    for (uint32_t k = 0; k < 4; ++k) {
      llvm::Value* sel = B.CreateAnd(B.CreateLShr(c, splat(4 * k)), splat(0xf));
      llvm::Value* v = B.CreateAnd(B.CreateLShr(t, B.CreateShl(B.CreateAnd(sel, splat(7)), splat(3))), splat(0xff));
      llvm::Value* sign = B.CreateSelect(B.CreateICmpNE(B.CreateAnd(v, splat(0x80)), splat(0)), splat(0xff), splat(0));
      v = B.CreateSelect(B.CreateICmpNE(B.CreateAnd(sel, splat(8)), splat(0)), sign, v);
      d = B.CreateOr(d, B.CreateShl(v, splat(8 * k)));
    }
    write(in.dst[0], d, mask);
    return;
  }
  default:
    break;
  }
  if (in.op == XOp::addc || in.op == XOp::subc || (is_integer(in.type) && (in.flags & (k_f_cc | k_f_carry_in)))) {
    emit_carry(in, mask);
    return;
  }
  if (in.type == PType::f32) {
    const bool approx = in.op == XOp::sin || in.op == XOp::cos || in.op == XOp::lg2 ||
                        in.op == XOp::ex2 || in.op == XOp::tanh;
    if (directed(in)) {
      write(in.dst[0], emit_directed(in, B.CreateBitCast(mask, i32)), mask);
      return;
    }
    write(in.dst[0], approx ? emit_f32_approx(in, B.CreateBitCast(mask, i32)) : emit_f32(in), mask);
    return;
  }
  if (in.type == PType::f64) {
    // abs, neg, copysign on the bits (exec_arith), testp on the magnitude, arithmetic
    llvm::Value* a = src(in.src[0]);
    llvm::Value* r = nullptr;
    switch (in.op) {
    case XOp::add: case XOp::sub: case XOp::mul: case XOp::fma: case XOp::div: case XOp::sqrt:
    case XOp::rcp: case XOp::min: case XOp::max:
      r = directed(in) ? emit_directed(in, B.CreateBitCast(mask, i32)) : emit_f64(in);
      break;
    case XOp::abs: r = B.CreateAnd(a, splat(0x7fffffffffffffffull)); break;
    case XOp::neg: r = B.CreateXor(a, splat(0x8000000000000000ull)); break;
    case XOp::copysign:
      r = B.CreateOr(B.CreateAnd(src(in.src[1]), splat(0x7fffffffffffffffull)),
                     B.CreateAnd(a, splat(0x8000000000000000ull)));
      break;
    default:
      r = B.CreateZExt(testp(B.CreateAnd(a, splat(0x7fffffffffffffffull)), 0x7ff0000000000000ull,
                             1ull << 52, in.mode, v64),
                       v64);
      break;
    }
    write(in.dst[0], r, mask);
    return;
  }
  if (is_half(in.type)) {
    write(in.dst[0], emit_half(in), mask);
    return;
  }
  write(in.dst[0], emit_int(in), mask);
}

} // namespace hone::emu::jit
