// Floating-point forms: f32, f64 and half precision, their rounding and special values.
#include "emu/jit/gen.hpp"

namespace hone::emu::jit {

llvm::Value* Gen::f32_result(llvm::Value* f) {
  llvm::Value* bits = B.CreateBitCast(f, v32);
  llvm::Value* nan = B.CreateFCmpUNO(f, f);
  llvm::Value* canon = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(k_lanes),
                                                      llvm::ConstantInt::get(i32, 0x7fffffffu));
  return B.CreateZExt(B.CreateSelect(nan, canon, bits), v64);
}

} // namespace hone::emu::jit
