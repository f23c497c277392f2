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

  Value one = arith::ConstantIntOp::create(builder, loc, i64, 1);
  Value gx = arith::ExtSIOp::create(builder, loc, i64, gridSize[0]);
  Value gy = arith::ExtSIOp::create(builder, loc, i64, gridSize[1]);
  auto loop = scf::ForOp::create(builder, loc, begin, end, one);
  builder.setInsertionPointToStart(loop.getBody());
  Value linear = loop.getInductionVar();
  Value x = arith::RemSIOp::create(builder, loc, linear, gx);
  Value rest = arith::DivSIOp::create(builder, loc, linear, gx);
  Value y = arith::RemSIOp::create(builder, loc, rest, gy);
  Value z = arith::DivSIOp::create(builder, loc, rest, gy);
  SmallVector<Value> loopCallArgs = callArgs;
  for (Value id : {x, y, z})
    loopCallArgs.push_back(arith::TruncIOp::create(builder, loc, i32, id));
  loopCallArgs.append(gridSize.begin(), gridSize.end());
  func::CallOp::create(builder, loc, kernel, loopCallArgs);

  builder.setInsertionPointToEnd(body);
  func::ReturnOp::create(builder, loc);
  return entry;
}
