#include "tile/Conversion/Passes.h"

namespace mlir::tile {
#define GEN_PASS_DEF_ATTACHLOOPANNOTATIONS
#include "tile/Conversion/Passes.h.inc"
} // namespace mlir::tile

using namespace mlir;

namespace {

/// scf-to-cf leaves a loop's annotation on its latch as a discardable attribute; the
/// translation to LLVM IR reads only the branch's own one when it emits !llvm.loop.
struct AttachLoopAnnotations : mlir::tile::impl::AttachLoopAnnotationsBase<AttachLoopAnnotations> {
  void runOnOperation() override {
    getOperation().walk([](LLVM::BrOp branch) {
      if (auto annotation =
              branch->getAttrOfType<LLVM::LoopAnnotationAttr>("llvm.loop_annotation")) {
        branch.setLoopAnnotationAttr(annotation);
        branch->removeAttr("llvm.loop_annotation");
      }
    });
  }
};

} // namespace
