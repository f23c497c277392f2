// Vectors of bfloat16 and float16 moved as vectors of i16.
//
// x86 has no instructions that load, select or merge 16-bit float vectors as such where
// the CPU lacks AVX512-FP16 (and, for bfloat16, AVX512-BF16): code generation promotes
// each lane on its own. A bfloat16 vector_add of 128 lanes for skylake-avx512 came out as
// 7,900 lines of assembly after 1.6 s of code generation, against 430 lines in 30 ms once
// its loads, its phi and its stores carried i16 lanes. The
// lowering has already turned the arithmetic on these types into integer operations or
// conversions, so only the moves of whole vectors are left to rewrite: loads and stores
// (masked, gathered and scattered too), phis, selects and shuffles. Each takes the i16
// vector of its float operands and gives a bitcast back to the float vector, which code
// generation folds into the next bitcast.
#include "MachineCode.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/Module.h"

using namespace llvm;

namespace {

bool isSixteenBitFloatVector(Type *type) {
  auto *vector = dyn_cast<FixedVectorType>(type);
  return vector && (vector->getElementType()->isBFloatTy() || vector->getElementType()->isHalfTy());
}

Type *asIntegers(Type *type) {
  auto *vector = cast<FixedVectorType>(type);
  return FixedVectorType::get(IntegerType::get(type->getContext(), 16), vector->getNumElements());
}

/// The intrinsic a call makes, where it is one of the masked moves.
Intrinsic::ID maskedMove(Instruction &instruction) {
  auto *call = dyn_cast<IntrinsicInst>(&instruction);
  if (!call)
    return Intrinsic::not_intrinsic;
  switch (call->getIntrinsicID()) {
  case Intrinsic::masked_load:
  case Intrinsic::masked_store:
  case Intrinsic::masked_gather:
  case Intrinsic::masked_scatter:
    return call->getIntrinsicID();
  default:
    return Intrinsic::not_intrinsic;
  }
}

/// Whether `instruction` moves a 16-bit float vector without computing on its lanes.
bool movesSixteenBitFloats(Instruction &instruction) {
  if (isa<StoreInst>(instruction))
    return isSixteenBitFloatVector(cast<StoreInst>(instruction).getValueOperand()->getType());
  Intrinsic::ID move = maskedMove(instruction);
  if (move == Intrinsic::masked_store || move == Intrinsic::masked_scatter)
    return isSixteenBitFloatVector(instruction.getOperand(0)->getType());
  if (!isSixteenBitFloatVector(instruction.getType()))
    return false;
  return isa<LoadInst, PHINode, SelectInst, ShuffleVectorInst>(instruction) ||
         move != Intrinsic::not_intrinsic;
}

class Rewriter {
public:
  explicit Rewriter(Function &function) : function(function) {}

  void run() {
    SmallVector<Instruction *> moves;
    for (Instruction &instruction : instructions(function))
      if (movesSixteenBitFloats(instruction))
        moves.push_back(&instruction);
    // Phis first, so that a loop's phi has its i16 twin before the values it carries
    // around the loop ask for it.
    SmallVector<std::pair<PHINode *, PHINode *>> phis;
    for (Instruction *move : moves)
      if (auto *phi = dyn_cast<PHINode>(move)) {
        auto *twin = PHINode::Create(asIntegers(phi->getType()), phi->getNumIncomingValues(),
                                     phi->getName() + ".i16", phi->getIterator());
        integers[phi] = twin;
        phis.push_back({phi, twin});
        replaced.push_back({phi, twin});
      }
    for (Instruction *move : moves)
      if (!isa<PHINode>(move))
        rewrite(*move);
    for (auto [phi, twin] : phis)
      for (unsigned i = 0; i < phi->getNumIncomingValues(); ++i)
        twin->addIncoming(integersOf(phi->getIncomingValue(i)), phi->getIncomingBlock(i));
    // The float values: a bitcast of each twin stands for them from here on.
    for (auto [original, twin] : replaced) {
      IRBuilder<> builder(twin->getParent(), isa<PHINode>(twin)
                                                 ? twin->getParent()->getFirstInsertionPt()
                                                 : std::next(twin->getIterator()));
      original->replaceAllUsesWith(builder.CreateBitCast(twin, original->getType()));
    }
    for (Instruction *move : moves)
      move->eraseFromParent();
  }

private:
  /// The i16 vector of a 16-bit float vector value.
  Value *integersOf(Value *value) {
    if (Value *known = integers.lookup(value))
      return known;
    if (auto *bitcast = dyn_cast<BitCastInst>(value);
        bitcast && bitcast->getOperand(0)->getType() == asIntegers(value->getType()))
      return bitcast->getOperand(0);
    Type *type = asIntegers(value->getType());
    if (auto *constant = dyn_cast<Constant>(value))
      return ConstantExpr::getBitCast(constant, type);
    BasicBlock::iterator at;
    if (auto *argument = dyn_cast<Argument>(value))
      at = function.getEntryBlock().getFirstInsertionPt();
    else if (isa<PHINode>(value))
      at = cast<Instruction>(value)->getParent()->getFirstInsertionPt();
    else
      at = std::next(cast<Instruction>(value)->getIterator());
    IRBuilder<> builder(at->getParent(), at);
    Value *cast = builder.CreateBitCast(value, type, value->getName() + ".i16");
    integers[value] = cast;
    return cast;
  }

  void rewrite(Instruction &move) {
    IRBuilder<> builder(&move);
    Value *twin = nullptr;
    if (auto *load = dyn_cast<LoadInst>(&move)) {
      auto *newLoad =
          builder.CreateAlignedLoad(asIntegers(load->getType()), load->getPointerOperand(),
                                    load->getAlign(), load->isVolatile());
      newLoad->copyMetadata(*load);
      twin = newLoad;
    } else if (auto *store = dyn_cast<StoreInst>(&move)) {
      auto *newStore = builder.CreateAlignedStore(integersOf(store->getValueOperand()),
                                                  store->getPointerOperand(), store->getAlign(),
                                                  store->isVolatile());
      newStore->copyMetadata(*store);
    } else if (auto *select = dyn_cast<SelectInst>(&move)) {
      twin = builder.CreateSelect(select->getCondition(), integersOf(select->getTrueValue()),
                                  integersOf(select->getFalseValue()));
    } else if (auto *shuffle = dyn_cast<ShuffleVectorInst>(&move)) {
      twin = builder.CreateShuffleVector(integersOf(shuffle->getOperand(0)),
                                         integersOf(shuffle->getOperand(1)),
                                         shuffle->getShuffleMask());
    } else {
      auto &call = cast<IntrinsicInst>(move);
      bool stores = call.getIntrinsicID() == Intrinsic::masked_store ||
                    call.getIntrinsicID() == Intrinsic::masked_scatter;
      Align align = call.getParamAlign(/*pointer operand:*/ stores ? 1 : 0).valueOrOne();
      switch (call.getIntrinsicID()) {
      case Intrinsic::masked_load:
        twin = builder.CreateMaskedLoad(asIntegers(call.getType()), call.getArgOperand(0), align,
                                        call.getArgOperand(1), integersOf(call.getArgOperand(2)));
        break;
      case Intrinsic::masked_gather:
        twin = builder.CreateMaskedGather(asIntegers(call.getType()), call.getArgOperand(0), align,
                                          call.getArgOperand(1), integersOf(call.getArgOperand(2)));
        break;
      case Intrinsic::masked_store:
        builder.CreateMaskedStore(integersOf(call.getArgOperand(0)), call.getArgOperand(1), align,
                                  call.getArgOperand(2));
        break;
      default:
        builder.CreateMaskedScatter(integersOf(call.getArgOperand(0)), call.getArgOperand(1), align,
                                    call.getArgOperand(2));
        break;
      }
    }
    if (twin) {
      integers[&move] = twin;
      replaced.push_back({&move, cast<Instruction>(twin)});
    }
  }

  Function &function;
  /// The i16 vector of each 16-bit float vector asked for: a move's twin or a bitcast.
  DenseMap<Value *, Value *> integers;
  /// Each move that gives a value, with the twin that replaces it.
  SmallVector<std::pair<Instruction *, Instruction *>> replaced;
};

} // namespace

void tile::moveSixteenBitFloatVectorsAsIntegers(Module &module) {
  for (Function &function : module)
    if (!function.isDeclaration())
      Rewriter(function).run();
}
