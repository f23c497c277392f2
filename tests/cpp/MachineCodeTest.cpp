// The LLVM side of a CPU compile: the kernel is inlined into its entry point before the
// optimizer runs, so that O3 simplifies its body once (its bottom-up inliner simplified
// the kernel, inlined it and simplified it again inside the entry: a third of the
// optimizer's time); 16-bit float vectors are moved as i16 vectors for code generation.
#include "MachineCode.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"

#include <gtest/gtest.h>

using namespace tile;

namespace {

// An entry point that calls an internal kernel per program, as the CPU lowering emits
// it, beside a call of an external function that must stay a call.
constexpr const char *kEntryAndKernel = R"(
declare void @external(ptr)

define internal void @kernel(ptr %out, i32 %program) {
  %slot = getelementptr i32, ptr %out, i32 %program
  store i32 %program, ptr %slot
  call void @external(ptr %slot)
  ret void
}

define void @kernel_cpu_entry(ptr %out, i32 %begin, i32 %end) {
entry:
  br label %loop
loop:
  %program = phi i32 [ %begin, %entry ], [ %next, %loop ]
  call void @kernel(ptr %out, i32 %program)
  %next = add i32 %program, 1
  %done = icmp eq i32 %next, %end
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
)";

TEST(MachineCode, LocalCallsAreInlinedAndTheirFunctionsDropped) {
  llvm::LLVMContext context;
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(kEntryAndKernel, error, context);
  ASSERT_TRUE(module) << error.getMessage().str();
  inlineLocalCalls(*module);
  EXPECT_FALSE(llvm::verifyModule(*module, &llvm::errs()));
  EXPECT_EQ(module->getFunction("kernel"), nullptr);
  llvm::Function *entry = module->getFunction("kernel_cpu_entry");
  ASSERT_NE(entry, nullptr);
  int stores = 0, externalCalls = 0;
  for (llvm::Instruction &instruction : llvm::instructions(*entry)) {
    stores += llvm::isa<llvm::StoreInst>(instruction);
    if (auto *call = llvm::dyn_cast<llvm::CallInst>(&instruction)) {
      ASSERT_NE(call->getCalledFunction(), nullptr);
      EXPECT_EQ(call->getCalledFunction()->getName(), "external");
      ++externalCalls;
    }
  }
  EXPECT_EQ(stores, 1) << "the kernel's body belongs in the entry's loop";
  EXPECT_EQ(externalCalls, 1);
}

// Every kind of move of a 16-bit float vector the rewrite knows: plain and masked loads
// and stores, a gather and a scatter, a loop-carried phi, a select and a shuffle, beside
// arithmetic on the float type that must keep it.
constexpr const char *kSixteenBitMoves = R"(
declare <8 x bfloat> @llvm.masked.load.v8bf16.p0(ptr, <8 x i1>, <8 x bfloat>)
declare void @llvm.masked.store.v8bf16.p0(<8 x bfloat>, ptr, <8 x i1>)
declare <8 x half> @llvm.masked.gather.v8f16.v8p0(<8 x ptr>, <8 x i1>, <8 x half>)
declare void @llvm.masked.scatter.v8f16.v8p0(<8 x half>, <8 x ptr>, <8 x i1>)

define void @moves(ptr %in, ptr %out, <8 x i1> %mask, <8 x ptr> %lanes, i1 %pick, i32 %n) {
entry:
  %first = load <8 x bfloat>, ptr %in, align 2
  br label %loop
loop:
  %i = phi i32 [ 0, %entry ], [ %next, %loop ]
  %carried = phi <8 x bfloat> [ %first, %entry ], [ %chosen, %loop ]
  %loaded = call <8 x bfloat> @llvm.masked.load.v8bf16.p0(ptr align 2 %in, <8 x i1> %mask, <8 x bfloat> zeroinitializer)
  %chosen = select i1 %pick, <8 x bfloat> %loaded, <8 x bfloat> %carried
  %next = add i32 %i, 1
  %done = icmp eq i32 %next, %n
  br i1 %done, label %exit, label %loop
exit:
  %turned = shufflevector <8 x bfloat> %chosen, <8 x bfloat> %first, <8 x i32> <i32 7, i32 6, i32 5, i32 4, i32 8, i32 9, i32 10, i32 11>
  call void @llvm.masked.store.v8bf16.p0(<8 x bfloat> %turned, ptr align 2 %out, <8 x i1> %mask)
  %halves = call <8 x half> @llvm.masked.gather.v8f16.v8p0(<8 x ptr> align 2 %lanes, <8 x i1> %mask, <8 x half> zeroinitializer)
  %sum = fadd <8 x half> %halves, %halves
  call void @llvm.masked.scatter.v8f16.v8p0(<8 x half> %sum, <8 x ptr> align 2 %lanes, <8 x i1> %mask)
  store <8 x half> %sum, ptr %out, align 2
  ret void
}
)";

TEST(MachineCode, SixteenBitFloatVectorsAreMovedAsIntegers) {
  llvm::LLVMContext context;
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> module =
      llvm::parseAssemblyString(kSixteenBitMoves, error, context);
  ASSERT_TRUE(module) << error.getMessage().str();
  moveSixteenBitFloatVectorsAsIntegers(*module);
  ASSERT_FALSE(llvm::verifyModule(*module, &llvm::errs()));
  auto sixteenBitFloats = [](llvm::Type *type) {
    auto *vector = llvm::dyn_cast<llvm::VectorType>(type);
    return vector &&
           (vector->getElementType()->isBFloatTy() || vector->getElementType()->isHalfTy());
  };
  int phis = 0, selects = 0, shuffles = 0, maskedMoves = 0, arithmetic = 0;
  for (llvm::Instruction &instruction : llvm::instructions(*module->getFunction("moves"))) {
    bool floatResult = sixteenBitFloats(instruction.getType());
    bool floatOperand = llvm::any_of(instruction.operands(), [&](llvm::Value *operand) {
      return sixteenBitFloats(operand->getType());
    });
    if (llvm::isa<llvm::BitCastInst>(instruction))
      continue;
    if (llvm::isa<llvm::BinaryOperator>(instruction) && instruction.getType()->isFPOrFPVectorTy()) {
      // The arithmetic keeps its float type.
      EXPECT_TRUE(floatResult);
      ++arithmetic;
      continue;
    }
    EXPECT_FALSE(floatResult || floatOperand) << "still moves float lanes: " << [&] {
      std::string text;
      llvm::raw_string_ostream stream(text);
      instruction.print(stream);
      return text;
    }();
    phis += llvm::isa<llvm::PHINode>(instruction) && instruction.getType()->isVectorTy();
    selects += llvm::isa<llvm::SelectInst>(instruction);
    shuffles += llvm::isa<llvm::ShuffleVectorInst>(instruction);
    maskedMoves += llvm::isa<llvm::IntrinsicInst>(instruction);
  }
  EXPECT_EQ(phis, 1);
  EXPECT_EQ(selects, 1);
  EXPECT_EQ(shuffles, 1);
  EXPECT_EQ(maskedMoves, 4);
  EXPECT_EQ(arithmetic, 1);
}

} // namespace
