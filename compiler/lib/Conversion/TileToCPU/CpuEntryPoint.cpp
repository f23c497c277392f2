#include "tile/Conversion/TileToCPU/TileToCPU.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

std::string mlir::tile::cpuEntryName(llvm::StringRef kernelName) {
  return (kernelName + "_cpu_entry").str();
}

func::FuncOp mlir::tile::buildCpuEntryPoint(OpBuilder &builder, func::FuncOp kernel) {
  MLIRContext *ctx = builder.getContext();
  Location loc = kernel.getLoc();
  Type ptrType = LLVM::LLVMPointerType::get(ctx);
  Type i32 = builder.getI32Type(), i64 = builder.getI64Type();

  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfter(kernel);
  auto entryType = builder.getFunctionType({ptrType, i64, i64, i32, i32, i32}, {});
  auto entry = func::FuncOp::create(builder, loc, cpuEntryName(kernel.getName()), entryType);
  Block *body = entry.addEntryBlock();
  builder.setInsertionPointToStart(body);
  Value args = body->getArgument(0), begin = body->getArgument(1), end = body->getArgument(2);
  ValueRange gridSize = body->getArguments().drop_front(3);

  // The arguments are read once, outside the loop over program instances.
  ArrayRef<Type> kernelArgTypes = kernel.getFunctionType().getInputs();
  unsigned userArgCount = kernelArgTypes.size() - kCpuGridArgCount;
  SmallVector<Value> callArgs;
  for (unsigned i = 0; i < userArgCount; ++i) {
    Value slot = LLVM::GEPOp::create(builder, loc, ptrType, ptrType, args,
                                     ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i)});
    Value valuePtr = LLVM::LoadOp::create(builder, loc, ptrType, slot);
    callArgs.push_back(LLVM::LoadOp::create(builder, loc, kernelArgTypes[i], valuePtr));
  }

  // Decompose `begin` into (x, y, z) once, then step through the grid by carrying, so
  // the loop pays no division per program instance.
  Value one64 = arith::ConstantIntOp::create(builder, loc, i64, 1);
  Value gx64 = arith::ExtSIOp::create(builder, loc, i64, gridSize[0]);
  Value gy64 = arith::ExtSIOp::create(builder, loc, i64, gridSize[1]);
  Value rest = arith::DivSIOp::create(builder, loc, begin, gx64);
  SmallVector<Value> start = {arith::RemSIOp::create(builder, loc, begin, gx64),
                              arith::RemSIOp::create(builder, loc, rest, gy64),
                              arith::DivSIOp::create(builder, loc, rest, gy64)};
  for (Value &coordinate : start)
    coordinate = arith::TruncIOp::create(builder, loc, i32, coordinate);
  auto loop = scf::ForOp::create(builder, loc, begin, end, one64, start);
  builder.setInsertionPointToStart(loop.getBody());
  ValueRange id = loop.getRegionIterArgs();
  SmallVector<Value> loopCallArgs = callArgs;
  loopCallArgs.append(id.begin(), id.end());
  loopCallArgs.append(gridSize.begin(), gridSize.end());
  func::CallOp::create(builder, loc, kernel, loopCallArgs);

  Value zero = arith::ConstantIntOp::create(builder, loc, i32, 0);
  Value one = arith::ConstantIntOp::create(builder, loc, i32, 1);
  auto increment = [&](Value v) { return arith::AddIOp::create(builder, loc, v, one); };
  Value nextX = increment(id[0]);
  Value wrapX = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, nextX, gridSize[0]);
  Value nextY = arith::SelectOp::create(builder, loc, wrapX, increment(id[1]), id[1]);
  Value wrapY = arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::eq, nextY, gridSize[1]);
  SmallVector<Value> next = {arith::SelectOp::create(builder, loc, wrapX, zero, nextX),
                             arith::SelectOp::create(builder, loc, wrapY, zero, nextY),
                             arith::SelectOp::create(builder, loc, wrapY, increment(id[2]), id[2])};
  scf::YieldOp::create(builder, loc, next);

  builder.setInsertionPointToEnd(body);
  func::ReturnOp::create(builder, loc);
  return entry;
}
