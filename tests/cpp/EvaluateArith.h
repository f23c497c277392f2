#ifndef TILE_TESTS_EVALUATEARITH_H
#define TILE_TESTS_EVALUATEARITH_H

// Index maps of the GPU lowering (lane maps, shared-memory layouts) are built as arith
// ops; built from constants, they are evaluated here so that tests check them as data.
#include "tile/Compiler/Compile.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <gtest/gtest.h>

namespace tile::testing {

/// A builder into a module of its own, for index maps built from constants: the ops it
/// creates go when the module does (a builder with no block would leak each of them).
struct ScratchModule {
  std::unique_ptr<mlir::MLIRContext> context = ::tile::createContext();
  mlir::OpBuilder b{context.get()};
  mlir::Location loc = b.getUnknownLoc();
  mlir::ModuleOp module = mlir::ModuleOp::create(loc);
  ScratchModule() { b.setInsertionPointToEnd(module.getBody()); }
  ~ScratchModule() { module->erase(); }
};

/// The value of an integer built from constants by the arith ops index maps use.
inline int64_t evaluate(mlir::Value v) {
  using namespace mlir;
  Operation *op = v.getDefiningOp();
  if (auto constant = dyn_cast<arith::ConstantOp>(op))
    return cast<IntegerAttr>(constant.getValue()).getInt();
  auto lhs = [&] { return evaluate(op->getOperand(0)); };
  auto rhs = [&] { return evaluate(op->getOperand(1)); };
  if (isa<arith::AddIOp>(op))
    return lhs() + rhs();
  if (isa<arith::SubIOp>(op))
    return lhs() - rhs();
  if (isa<arith::MulIOp>(op))
    return lhs() * rhs();
  if (isa<arith::DivUIOp, arith::DivSIOp>(op))
    return lhs() / rhs();
  if (isa<arith::RemUIOp, arith::RemSIOp>(op))
    return lhs() % rhs();
  if (isa<arith::AndIOp>(op))
    return lhs() & rhs();
  if (isa<arith::XOrIOp>(op))
    return lhs() ^ rhs();
  if (isa<arith::ShLIOp>(op))
    return lhs() << rhs();
  if (isa<arith::ShRUIOp>(op))
    return lhs() >> rhs();
  ADD_FAILURE() << "unexpected op in an index map: " << op->getName().getStringRef().str();
  return -1;
}

} // namespace tile::testing

#endif
