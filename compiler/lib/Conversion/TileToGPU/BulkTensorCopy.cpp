// Hopper's bulk tensor copies (TMA) for the warpgroup MMA's K loop. One thread of the
// block issues, per stage, a copy of each operand tile from a tensor map (a 128-byte
// descriptor the host encodes and the kernel takes as a parameter) into the stage's
// swizzled buffer; the copies complete on the stage's mbarrier, which counts the bytes
// they write. The other threads compute no addresses and issue no copies, and the tile's
// edges need no masks: the copy fills what lies outside the matrix with zeros.
#include "GpuLowering.h"

#include "tile/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <algorithm>
#include <map>

using namespace mlir;
using namespace mlir::tile;
using namespace mlir::tile::gpu_lowering;

namespace {

/// `poly` with equal monomials merged and zero ones dropped (factors compared as a
/// multiset), so that structurally different spellings of one value compare equal.
ScalarPoly normalized(const ScalarPoly &poly) {
  std::map<SmallVector<void *, 2>, std::pair<ScalarPoly::Monomial, int64_t>> terms;
  for (const auto &monomial : poly.monomials) {
    SmallVector<void *, 2> key;
    for (Value factor : monomial.factors)
      key.push_back(factor.getAsOpaquePointer());
    llvm::sort(key);
    auto [it, inserted] = terms.try_emplace(key, monomial, 0);
    it->second.second += monomial.coefficient;
  }
  ScalarPoly result = ScalarPoly::of(poly.constant);
  for (auto &[key, term] : terms)
    if (term.second != 0) {
      ScalarPoly::Monomial monomial = term.first;
      monomial.coefficient = term.second;
      result.monomials.push_back(monomial);
    }
  return result;
}

/// The single runtime value `poly` is (one factor, coefficient 1, no constant), if it is.
Value singleFactor(const ScalarPoly &poly) {
  ScalarPoly n = normalized(poly);
  if (n.constant != 0 || n.monomials.size() != 1 || n.monomials[0].coefficient != 1 ||
      n.monomials[0].factors.size() != 1)
    return {};
  return n.monomials[0].factors[0];
}

/// Whether `bound + coordinate` is one argument of the kernel: the mask is
/// `coordinate + lane < size` for a size the kernel takes, the matrix's extent that the
/// host's tensor map has too.
bool boundsTheMatrix(const SmallVector<ScalarPoly, 1> &bounds, const ScalarPoly &coordinate) {
  if (bounds.size() != 1)
    return false;
  Value size = singleFactor(bounds[0] + coordinate);
  return size && isa<BlockArgument>(size);
}

} // namespace

std::optional<BulkCopyOperand> mlir::tile::gpu_lowering::bulkCopyOperand(const StagedOperand &operand,
                                                                         const SharedLayout &shared,
                                                                         unsigned innerDim, int64_t elementBytes,
                                                                         Value map) {
  unsigned outerDim = 1 - innerDim;
  if (!map || operand.lanes.strides.size() != 2 || operand.bounds.upper.size() != 2)
    return std::nullopt;
  if (operand.lanes.strides[innerDim].getConstant() != 1)
    return std::nullopt;
  Value outerStride = singleFactor(operand.lanes.strides[outerDim]);
  if (!outerStride)
    return std::nullopt;
  // offset = outer * outerStride + inner: the monomials that hold the stride once give
  // the outer coordinate, the others the inner one.
  BulkCopyOperand copy;
  copy.map = map;
  copy.innerDim = innerDim;
  copy.elementBytes = elementBytes;
  copy.inner = ScalarPoly::of(operand.lanes.offset.constant);
  for (const auto &monomial : normalized(operand.lanes.offset).monomials) {
    auto at = llvm::find(monomial.factors, outerStride);
    if (at == monomial.factors.end()) {
      copy.inner.monomials.push_back(monomial);
      continue;
    }
    ScalarPoly::Monomial rest = monomial;
    rest.factors.erase(rest.factors.begin() + (at - monomial.factors.begin()));
    if (llvm::is_contained(rest.factors, outerStride))
      return std::nullopt;
    copy.outer.monomials.push_back(rest);
  }
  if (!boundsTheMatrix(operand.bounds.upper[outerDim], copy.outer) ||
      !boundsTheMatrix(operand.bounds.upper[innerDim], copy.inner))
    return std::nullopt;
  // One box per swizzle atom column: rows of the atom's 32, 64 or 128 bytes, the tile's
  // rows tall (at most 256, the box's limit).
  copy.boxInner = shared.chunked() ? shared.chunk : shared.inner;
  copy.boxOuter = shared.outer;
  copy.boxes = shared.inner / copy.boxInner;
  copy.swizzleBytes = copy.boxInner * elementBytes;
  if (copy.swizzleBytes != 32 && copy.swizzleBytes != 64 && copy.swizzleBytes != 128)
    return std::nullopt;
  if (copy.boxOuter > 256 || copy.boxes * copy.boxInner != shared.inner)
    return std::nullopt;
  return copy;
}

void mlir::tile::gpu_lowering::recordTensorMap(RewriterBase &rewriter, Operation *op, int64_t operand,
                                               const BulkCopyOperand &copy, Type element) {
  auto func = op->getParentOfType<gpu::GPUFuncOp>();
  // CUtensorMapDataType: 6 f16, 7 f32, 9 bf16.
  int64_t dataType = element.isBF16() ? 9 : element.isF32() ? 7 : 6;
  auto i64 = [&](int64_t v) { return rewriter.getI64IntegerAttr(v); };
  SmallVector<Attribute> maps;
  if (auto recorded = func->getAttrOfType<ArrayAttr>(kTensorMapsAttrName))
    maps.append(recorded.begin(), recorded.end());
  maps.push_back(rewriter.getDictionaryAttr({
      rewriter.getNamedAttr("operand", i64(operand)),
      rewriter.getNamedAttr("contiguous_dim", i64(copy.innerDim)),
      rewriter.getNamedAttr("box_inner", i64(copy.boxInner)),
      rewriter.getNamedAttr("box_outer", i64(copy.mapBoxOuter())),
      rewriter.getNamedAttr("swizzle_bytes", i64(copy.swizzleBytes)),
      rewriter.getNamedAttr("data_type", i64(dataType)),
  }));
  rewriter.modifyOpInPlace(func, [&] { func->setAttr(kTensorMapsAttrName, rewriter.getArrayAttr(maps)); });
}

bool mlir::tile::gpu_lowering::splitAcrossCluster(BulkCopyOperand &copy, int64_t ctas) {
  if (ctas <= 1 || copy.boxes % ctas == 0)
    return true;
  // One box: its rows in `ctas` parts, each starting at a multiple of the swizzle's
  // 8-row period, so that each part lands swizzled as the whole box would.
  if (copy.boxes != 1 || copy.boxOuter % (8 * ctas) != 0)
    return false;
  copy.parts = ctas;
  return true;
}

void mlir::tile::gpu_lowering::initTensorMapBarriers(OpBuilder &b, Location loc, Value barriers, int64_t count,
                                                     Value threadId, int64_t arrivals, int64_t first) {
  Value isFirst = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, threadId,
                                                i32Constant(b, loc, 0));
  scf::IfOp::create(b, loc, isFirst, [&](OpBuilder &b, Location loc) {
    for (int64_t i = first; i < first + count; ++i)
      inlinePtx(b, loc, "mbarrier.init.shared::cta.b64 [$0], $1;", 0, "r,r",
                ValueRange{tensorMapBarrier(b, loc, barriers, i32Constant(b, loc, i)),
                           i32Constant(b, loc, arrivals)},
                {});
    // The barriers' initialization becomes visible to the copy engine.
    inlinePtx(b, loc, "fence.mbarrier_init.release.cluster;", 0, "", {}, {});
    scf::YieldOp::create(b, loc);
  });
}

void mlir::tile::gpu_lowering::invalidateTensorMapBarriers(OpBuilder &b, Location loc, Value barriers,
                                                           int64_t count, Value threadId) {
  Value first = b.createOrFold<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, threadId,
                                              i32Constant(b, loc, 0));
  scf::IfOp::create(b, loc, first, [&](OpBuilder &b, Location loc) {
    for (int64_t i = 0; i < count; ++i)
      inlinePtx(b, loc, "mbarrier.inval.shared::cta.b64 [$0];", 0, "r",
                ValueRange{tensorMapBarrier(b, loc, barriers, i32Constant(b, loc, i))}, {});
    scf::YieldOp::create(b, loc);
  });
}

Value mlir::tile::gpu_lowering::tensorMapBarrier(OpBuilder &b, Location loc, Value barriers, Value slot) {
  auto sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), kSharedAddressSpace);
  return LLVM::GEPOp::create(b, loc, sharedPtr, b.getI64Type(), barriers, ValueRange{slot});
}

void mlir::tile::gpu_lowering::issueBulkCopies(OpBuilder &b, Location loc, ArrayRef<BulkCopyPlacement> copies,
                                               Value barrier, Value issue) {
  int64_t bytes = 0;
  for (const BulkCopyPlacement &copy : copies)
    bytes += copy.operand->boxes * copy.operand->boxInner * copy.operand->boxOuter * copy.operand->elementBytes;
  scf::IfOp::create(b, loc, issue, [&](OpBuilder &b, Location loc) {
    // Every block of a cluster announces the whole stage's bytes on its own barrier:
    // its own copies and the shares the others multicast to it complete there.
    inlinePtx(b, loc, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", 0, "r,r",
              ValueRange{barrier, i32Constant(b, loc, bytes)}, {});
    auto sharedPtr = LLVM::LLVMPointerType::get(b.getContext(), kSharedAddressSpace);
    auto c = [&](int64_t v) { return i32Constant(b, loc, v); };
    for (const BulkCopyPlacement &copy : copies) {
      const BulkCopyOperand &operand = *copy.operand;
      int64_t pieces = operand.boxes * operand.parts, partOuter = operand.mapBoxOuter();
      int64_t share = copy.rank ? pieces / copy.ctas : pieces;
      for (int64_t j = 0; j < share; ++j) {
        // Piece q is part q % parts of box q / parts; a block of a cluster copies the
        // pieces [rank * share, (rank + 1) * share).
        Value piece = c(j);
        if (copy.rank)
          piece = b.createOrFold<arith::AddIOp>(
              loc, b.createOrFold<arith::MulIOp>(loc, copy.rank, c(share)), piece);
        Value box = b.createOrFold<arith::DivUIOp>(loc, piece, c(operand.parts));
        Value part = b.createOrFold<arith::RemUIOp>(loc, piece, c(operand.parts));
        Value first = b.createOrFold<arith::AddIOp>(
            loc, b.createOrFold<arith::MulIOp>(loc, box, c(operand.boxInner * operand.boxOuter)),
            b.createOrFold<arith::MulIOp>(loc, part, c(operand.boxInner * partOuter)));
        Value dst = LLVM::GEPOp::create(b, loc, sharedPtr, copy.element, copy.stage, ValueRange{first});
        Value inner = b.createOrFold<arith::AddIOp>(
            loc, copy.inner, b.createOrFold<arith::MulIOp>(loc, box, c(operand.boxInner)));
        Value outer = b.createOrFold<arith::AddIOp>(
            loc, copy.outer, b.createOrFold<arith::MulIOp>(loc, part, c(partOuter)));
        if (!copy.rank) {
          inlinePtx(b, loc,
                    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                    "[$0], [$1, {$2, $3}], [$4];",
                    0, "r,l,r,r,r", ValueRange{dst, operand.map, inner, outer, barrier}, {});
          continue;
        }
        Value everyBlock = arith::ConstantIntOp::create(b, loc, b.getI16Type(), (int64_t(1) << copy.ctas) - 1);
        inlinePtx(b, loc,
                  "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                  ".multicast::cluster [$0], [$1, {$2, $3}], [$4], $5;",
                  0, "r,l,r,r,r,h", ValueRange{dst, operand.map, inner, outer, barrier, everyBlock}, {});
      }
    }
    scf::YieldOp::create(b, loc);
  });
}

void mlir::tile::gpu_lowering::arriveOnBarrier(OpBuilder &b, Location loc, Value barrier) {
  inlinePtx(b, loc, "mbarrier.arrive.shared::cta.b64 _, [$0];", 0, "r", ValueRange{barrier}, {});
}

void mlir::tile::gpu_lowering::arriveOnClusterBarriers(OpBuilder &b, Location loc, Value barrier, int64_t ctas) {
  // The arrival tells the copies' issuer that this warp's MMAs are done reading the
  // stage (their wait came first); it orders no memory of its own, so it keeps the
  // default CTA-scoped release, as CUTLASS's cluster pipelines do: a cluster-scoped
  // release costs a fence per warp and K step.
  for (int64_t rank = 0; rank < ctas; ++rank)
    inlinePtx(b, loc,
              "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, $0, $1;\n"
              "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}",
              0, "r,r", ValueRange{barrier, i32Constant(b, loc, rank)}, {});
}

Value mlir::tile::gpu_lowering::clusterRank(OpBuilder &b, Location loc) {
  return LLVM::InlineAsmOp::create(b, loc, TypeRange{b.getI32Type()}, ValueRange{}, "mov.u32 $0, %cluster_ctarank;",
                                   "=r", /*has_side_effects=*/false, /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr())
      .getResult(0);
}

void mlir::tile::gpu_lowering::clusterBarrier(OpBuilder &b, Location loc) {
  inlinePtx(b, loc, "barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;", 0, "", {},
            {});
}

void mlir::tile::gpu_lowering::waitForBulkCopies(OpBuilder &b, Location loc, Value barrier, Value phase) {
  // Braces scope the label: the wait appears once per unrolled copy of the loop body.
  inlinePtx(b, loc,
            "{\n.reg .pred done;\nwait:\nmbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
            "@!done bra.uni wait;\n}",
            0, "r,r", ValueRange{barrier, phase}, {});
}
