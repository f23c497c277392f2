// Masked loads and stores of many 8- and 16-bit lanes as a loop over the lanes.
//
// Without AVX512-BW, x86 has masked moves only for 32- and 64-bit lanes (vpmaskmov), so
// code generation expands a masked move of narrower lanes into a branch per lane, each
// with its own load or store. A 128-lane bfloat16 vector_add for x86-64-v3 came out as
// ~3,500 instructions (a BLOCK_SIZE of 1024 took 85 s to compile); a loop over the lanes
// through a stack copy of the vector is a few instructions, and these moves are the
// edge blocks' only. Moves of fewer lanes than kMinLanes keep LLVM's expansion.
#include "MachineCode.h"

#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/BasicBlockUtils.h"

using namespace llvm;

namespace {

constexpr unsigned kMinLanes = 32;

/// The vector a masked load gives or a masked store takes, where its lanes are narrow
/// and many; null otherwise.
FixedVectorType *narrowLanesOf(IntrinsicInst &call) {
  Type *data = nullptr;
  if (call.getIntrinsicID() == Intrinsic::masked_load)
    data = call.getType();
  else if (call.getIntrinsicID() == Intrinsic::masked_store)
    data = call.getArgOperand(0)->getType();
  auto *vector = dyn_cast_or_null<FixedVectorType>(data);
  if (!vector || !vector->getElementType()->isIntegerTy() || vector->getScalarSizeInBits() > 16 ||
      vector->getNumElements() < kMinLanes)
    return nullptr;
  return vector;
}

void expandIntoLoop(IntrinsicInst &call, FixedVectorType *type) {
  Function &function = *call.getFunction();
  bool load = call.getIntrinsicID() == Intrinsic::masked_load;
  Value *pointer = call.getArgOperand(load ? 0 : 1);
  Value *mask = call.getArgOperand(load ? 1 : 2);
  Type *element = type->getElementType();
  Align laneAlign = commonAlignment(call.getParamAlign(load ? 0 : 1).valueOrOne(),
                                    element->getScalarSizeInBits() / 8);
  unsigned laneCount = type->getNumElements();

  IRBuilder<> atEntry(&function.getEntryBlock(), function.getEntryBlock().getFirstInsertionPt());
  auto *maskBytesType = FixedVectorType::get(atEntry.getInt8Ty(), laneCount);
  AllocaInst *lanes = atEntry.CreateAlloca(type, nullptr, "masked.lanes");
  AllocaInst *maskBytes = atEntry.CreateAlloca(maskBytesType, nullptr, "masked.on");

  // The loaded lanes start as the pass-through; a store's lanes are its value.
  IRBuilder<> before(&call);
  before.CreateStore(call.getArgOperand(load ? 2 : 0), lanes);
  before.CreateStore(before.CreateZExt(mask, maskBytesType), maskBytes);
  auto [body, index] =
      SplitBlockAndInsertSimpleForLoop(before.getInt64(laneCount), call.getIterator());
  IRBuilder<> inLoop(body);
  Value *on = inLoop.CreateICmpNE(
      inLoop.CreateLoad(inLoop.getInt8Ty(), inLoop.CreateGEP(inLoop.getInt8Ty(), maskBytes, index)),
      inLoop.getInt8(0));
  Instruction *move = SplitBlockAndInsertIfThen(on, body->getIterator(), /*Unreachable=*/false);
  IRBuilder<> ifOn(move);
  Value *memory = ifOn.CreateGEP(element, pointer, index);
  Value *copy = ifOn.CreateGEP(element, lanes, index);
  if (load)
    ifOn.CreateStore(ifOn.CreateAlignedLoad(element, memory, laneAlign), copy);
  else
    ifOn.CreateAlignedStore(ifOn.CreateLoad(element, copy), memory, laneAlign);

  if (load) {
    IRBuilder<> after(&call);
    call.replaceAllUsesWith(after.CreateLoad(type, lanes));
  }
  call.eraseFromParent();
}

} // namespace

void tile::loopNarrowMaskedMoves(Module &module) {
  SmallVector<std::pair<IntrinsicInst *, FixedVectorType *>> moves;
  for (Function &function : module)
    for (Instruction &instruction : instructions(function))
      if (auto *call = dyn_cast<IntrinsicInst>(&instruction))
        if (FixedVectorType *type = narrowLanesOf(*call))
          moves.push_back({call, type});
  for (auto [call, type] : moves)
    expandIntoLoop(*call, type);
}
