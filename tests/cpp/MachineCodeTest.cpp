// The LLVM side of a CPU compile: the kernel is inlined into its entry point before the
// optimizer runs, so that O3 simplifies its body once (its bottom-up inliner simplified
// the kernel, inlined it and simplified it again inside the entry: a third of the
// optimizer's time).
#include "MachineCode.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
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

} // namespace
