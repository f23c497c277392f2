// out[i] = a[i] + b[i] over n elements, one BLOCK_SIZE block per program instance.
#include "ops/KernelBuilders.h"

#include "tile/Dialect/Tile/IR/TileDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <stdexcept>

using namespace mlir;

namespace tile::ops {

OwningOpRef<ModuleOp> buildVectorAdd(MLIRContext &context, const KernelSpec &spec) {
  if (spec.dtypes.size() != 1)
    throw std::invalid_argument("vector_add takes one dtype, got spec " + spec.str());
  int64_t block = spec.knob("BLOCK_SIZE");
  int64_t indexBits = spec.knob("index_bits");
  if (block <= 0 || (block & (block - 1)) != 0)
    throw std::invalid_argument("vector_add BLOCK_SIZE must be a power of two, got " +
                                std::to_string(block));
  if (indexBits != 32 && indexBits != 64)
    throw std::invalid_argument("vector_add index_bits must be 32 or 64");

  OpBuilder b(&context);
  Location loc = b.getUnknownLoc();
  Type element = elementTypeOf(context, spec.dtypes[0]);
  if (!isa<FloatType>(element))
    throw std::invalid_argument("vector_add adds floating-point tensors (f32, f16, bf16), got " +
                                spec.dtypes[0]);
  // Half-precision sums are formed in f32 and rounded once, as torch.add does on the CPU.
  Type compute = element.isF32() ? element : b.getF32Type();
  Type index = b.getIntegerType(indexBits);
  Type ptr = mlir::tile::PointerType::get(&context, element);
  auto blockOf = [&](Type type) { return RankedTensorType::get({block}, type); };

  OwningOpRef<ModuleOp> module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto func = func::FuncOp::create(b, loc, "vector_add",
                                   b.getFunctionType({ptr, ptr, ptr, index}, {}));
  func->setAttr(mlir::tile::kKernelAttrName, b.getUnitAttr());
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value a = body->getArgument(0), bArg = body->getArgument(1), out = body->getArgument(2);
  Value n = body->getArgument(3);

  Value pid = mlir::tile::ProgramIdOp::create(b, loc, b.getI32Type(), 0);
  Value lanes = mlir::tile::MakeRangeOp::create(b, loc, blockOf(b.getI32Type()), 0, block);
  if (indexBits == 64) {
    pid = arith::ExtSIOp::create(b, loc, index, pid);
    lanes = arith::ExtSIOp::create(b, loc, blockOf(index), lanes);
  }
  Value start = arith::MulIOp::create(b, loc, pid, arith::ConstantIntOp::create(b, loc, index, block));
  Value offsets = arith::AddIOp::create(
      b, loc, mlir::tile::SplatOp::create(b, loc, blockOf(index), start), lanes);
  Value mask = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, offsets,
                                     mlir::tile::SplatOp::create(b, loc, blockOf(index), n));
  auto pointers = [&](Value base) -> Value {
    Value splat = mlir::tile::SplatOp::create(b, loc, blockOf(ptr), base);
    return mlir::tile::AddPtrOp::create(b, loc, blockOf(ptr), splat, offsets);
  };
  auto loadAs = [&](Value base) -> Value {
    Value value = mlir::tile::LoadOp::create(b, loc, pointers(base), mask);
    return compute == element ? value : arith::ExtFOp::create(b, loc, blockOf(compute), value);
  };
  Value sum = arith::AddFOp::create(b, loc, loadAs(a), loadAs(bArg));
  if (compute != element)
    sum = arith::TruncFOp::create(b, loc, blockOf(element), sum);
  mlir::tile::StoreOp::create(b, loc, pointers(out), sum, mask);
  func::ReturnOp::create(b, loc);
  return module;
}

} // namespace tile::ops
