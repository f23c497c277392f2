#include "MatmulCall.h"

#include "AtenParallelFor.h"
#include "DTypes.h"
#include "ops/MatmulConfig.h"
#include "runtime/ColumnSums.h"
#include "runtime/PanelPacking.h"
#include "runtime/Transpose.h"
#include "tile/Target/CpuArch.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace {

bool isHalf(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

/// The output dtype, after checking the pair: float32 -> float32, float16/bfloat16 ->
/// themselves or float32, int8 -> int32 (which must be asked for).
at::ScalarType outputDtype(const char *op, at::ScalarType input,
                           std::optional<at::ScalarType> requested, bool epilogue) {
  if (input == at::kChar) {
    TORCH_CHECK_TYPE(!epilogue, op, ": int8 inputs are not supported; leaky_relu needs "
                                    "floating-point inputs (float32, float16, bfloat16)");
    TORCH_CHECK_TYPE(requested == at::kInt, op,
                     ": int8 inputs accumulate in int32; pass out_dtype=torch.int32",
                     requested ? " (got out_dtype=" : "",
                     requested ? c10::toString(*requested) : "", requested ? ")" : "");
    return at::kInt;
  }
  at::ScalarType out = requested.value_or(input);
  TORCH_CHECK_TYPE(out == input || (isHalf(input) && out == at::kFloat), op, ": out_dtype ", out,
                   " is not supported for ", input, " inputs; supported: ", input,
                   isHalf(input) ? " or float32" : "");
  return out;
}

void checkOperands(const char *op, const at::Tensor &a, const at::Tensor &b) {
  TORCH_CHECK(a.device() == b.device(), op, ": tensor a is on ", a.device(), " but b is on ",
              b.device());
  TORCH_CHECK(a.layout() == at::kStrided && b.layout() == at::kStrided, op,
              ": only dense (strided) tensors are supported");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, op, ": a and b must be 2-D matrices, got a of shape ",
              a.sizes(), " and b of shape ", b.sizes());
  TORCH_CHECK(a.size(1) == b.size(0), op, ": inner dimensions differ: a is ", a.sizes(),
              " and b is ", b.sizes(), " (a.shape[1] must equal b.shape[0])");
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), op, ": dtypes differ: a is ",
                   a.scalar_type(), " and b is ", b.scalar_type());
  auto dtype = a.scalar_type();
  TORCH_CHECK_TYPE(dtype == at::kFloat || isHalf(dtype) || dtype == at::kChar, op,
                   ": unsupported dtype ", dtype,
                   "; supported: float32, float16, bfloat16, int8 (with out_dtype=torch.int32)");
}

/// An operand of the epilogue (`what`: "bias", "activation") on the operands' device and
/// dense; its shape is its own caller's to check.
void checkEpilogueOperandPlace(const char *op, const char *what, const at::Tensor &t,
                               const at::Tensor &a) {
  TORCH_CHECK(t.device() == a.device(), op, ": ", what, " is on ", t.device(),
              " but the operands are on ", a.device());
  TORCH_CHECK(t.layout() == at::kStrided, op, ": the ", what, " must be a dense (strided) tensor");
}

/// An operand of the epilogue in the input or the output dtype.
void checkEpilogueOperandDtype(const char *op, const char *what, const at::Tensor &t,
                               const at::Tensor &a, at::ScalarType out) {
  TORCH_CHECK_TYPE(t.scalar_type() == a.scalar_type() || t.scalar_type() == out, op, ": ", what,
                   " dtype ", t.scalar_type(), " is neither the input dtype (", a.scalar_type(),
                   ") nor the output dtype (", out, ")");
}

/// A bias of length N in the input or the output dtype, on the operands' device.
void checkBias(const char *op, const at::Tensor &bias, const at::Tensor &a, int64_t n,
               at::ScalarType out) {
  checkEpilogueOperandPlace(op, "bias", bias, a);
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == n, op,
              ": bias must be 1-D of length N = b.shape[1] = ", n, ", got shape ", bias.sizes());
  checkEpilogueOperandDtype(op, "bias", bias, a, out);
}

/// A tensor as the runtime sees it.
tile::runtime::StridedOperand operandOf(const at::Tensor &t) {
  tile::runtime::StridedOperand operand;
  operand.data = t.data_ptr();
  operand.dims = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) {
    operand.sizes[d] = t.size(d);
    operand.strides[d] = t.stride(d);
  }
  operand.elementBytes = t.element_size();
  return operand;
}

} // namespace

/// Bits of the `unit_strides` knob (bit i: the kernel's argument 6 + i; a's strides are
/// bits 0-1, b's 2-3, c's 4-5): the column strides of a and b, and of c.
constexpr int64_t kUnitColumnStridesOfAB = 1 << 1 | 1 << 3;
constexpr int64_t kUnitColumnStrideOfA = 1 << 1;
constexpr int64_t kUnitColumnStrideOfB = 1 << 3;
constexpr int64_t kUnitColumnStrideOfC = 1 << 5;
/// b's k contiguous: set only for calls that take dots along k (rowDots in prepareMatmul,
/// up to rowDotRows rows of a).
constexpr int64_t kUnitRowStrideOfB = 1 << 2;

// The signature's slots.
enum Slot {
  kOp,
  kInput,
  kOutput,
  kEpilogueOperand, ///< the bias's dtype, or the activation's; -1 for neither
  kIndexBits,
  kM,
  kN,
  kK,
  kUnitStrides,
  kDivisibility,
  kTf32,
  kDevice
};
/// The op, in the kOp slot.
constexpr int64_t kMatmulOp = 0, kLeakyReluOp = 1, kLeakyReluBackwardOp = 2;
/// The CPU specializes on no divisibility: there the slot records the copies the call
/// writes: bit 0 a copy of a that the launch's threads share (see withMatrixTiles), bit 1
/// panels of a b whose columns are not contiguous (made whatever the call's size), bit 2
/// an int8 call's bias replaced by one that takes off b's column sums (prepareMatmul), for
/// a kernel that reads a + 128 (unsigned_a).
constexpr Slot kCopies = kDivisibility;
constexpr int64_t kCopyOfA = 1, kPanelsOfStridedB = 2, kUnsignedA = 4;

namespace {

/// A CPU launch runs one group of the grouped order where GROUP_M covers the block rows
/// (block columns one after another, block rows fastest): a kernel for such a call takes
/// its block from a 2-D grid (grid_2d) and divides nothing per program.
void chooseCpuGridOrder(std::map<std::string, int64_t> &config, int64_t m) {
  int64_t blockM = config.at("BLOCK_M");
  if ((m + blockM - 1) / blockM <= config.at("GROUP_M"))
    config["grid_2d"] = 1;
  else
    config.erase("grid_2d");
}

} // namespace

std::pair<tile::ops::KernelSpec, int64_t>
tile::binding::MatmulCall::withConfig(const std::map<std::string, int64_t> &knobs) const {
  ops::KernelSpec tuned = spec;
  const auto &names = ops::matmulKnobNames();
  for (const auto &[name, value] : knobs) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw std::invalid_argument("unknown matmul config knob '" + name + "'");
    if (value < 0 || (name.rfind("BLOCK_", 0) == 0 && value == 0))
      throw std::invalid_argument("matmul config knob " + name + " must be positive, got " +
                                  std::to_string(value));
    tuned.config[name] = value;
  }
  tuned.config = ops::withCurrentSpellings(tuned.config, *target);
  // Panels in groups of k suit some blocks only: tuned ones get them where they do.
  if (auto packed = tuned.config.find("packed_b"); packed != tuned.config.end() && packed->second)
    packed->second = panelGroupFor(*target, tuned.dtypes.at(0),
                                   signature[kUnitStrides] & kUnitColumnStrideOfA, tuned.config);
  if (!knobs.count("num_stages"))
    tuned.config = ops::withStagesThatFit(tuned.config, *target, tuned.dtypes.at(0));
  if (target->kind == TargetKind::Cpu)
    chooseCpuGridOrder(tuned.config, c.size(0));
  int64_t programs = runtime::matmulPrograms(tuned.config, c.size(0), c.size(1));
  if (programs > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("the config needs more than 2**31 program instances");
  return {tuned, programs};
}

void tile::binding::checkActivation(const char *op, const at::Tensor &activation,
                                    const at::Tensor &a, const at::Tensor &b, at::ScalarType out) {
  checkEpilogueOperandPlace(op, "activation", activation, a);
  TORCH_CHECK(activation.dim() == 2 && activation.size(0) == a.size(0) &&
                  activation.size(1) == b.size(1),
              op, ": activation must have the result's shape (M, N) = (", a.size(0), ", ",
              b.size(1), "), got shape ", activation.sizes());
  checkEpilogueOperandDtype(op, "activation", activation, a, out);
}

at::ScalarType tile::binding::checkMatmulCall(const char *op, const at::Tensor &a,
                                              const at::Tensor &b, bool epilogue,
                                              std::optional<at::ScalarType> outDtype,
                                              const std::optional<at::Tensor> &bias) {
  checkOperands(op, a, b);
  at::ScalarType out = outputDtype(op, a.scalar_type(), outDtype, epilogue);
  if (bias)
    checkBias(op, *bias, a, b.size(1), out);
  return out;
}

namespace {

/// a's view as the kernel reads it, and where that is a copy, what writes its rows
/// [first, last) into a copy (the rows past M as zeros) and the copy's bytes: the launch's
/// threads write it (matmulCpu).
struct CopyOfA {
  at::Tensor view;
  std::function<void(char *, int64_t, int64_t)> writeRows;
  int64_t bytes = 0;
};

/// Rows [first, last) of a copy `pitch` bytes apart as zeros.
void zeroRows(char *copy, int64_t pitch, int64_t first, int64_t last) {
  if (last > first)
    std::memset(copy + first * pitch, 0, size_t((last - first) * pitch));
}

/// The scratch a copy of a goes to: `rows` rows of a's k elements, each padded to whole
/// cache lines (the view takes in the padding), and the rows' pitch in bytes.
std::pair<at::Tensor, int64_t> scratchRowsOnWholeLines(const at::Tensor &a, int64_t rows) {
  constexpr int64_t kCacheLine = 64;
  int64_t bytes = a.element_size();
  int64_t pitch = (a.size(1) * bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
  void *copy = tile::runtime::threadScratch(tile::runtime::ScratchUse::AlignedA, rows * pitch);
  return {at::from_blob(copy, {rows, pitch / bytes}, {pitch / bytes, 1}, a.options()), pitch};
}

/// a, or a copy of it whose rows lie whole cache lines apart and whose rows are a whole
/// number of 64-row blocks, where the matrix tiles read it.
/// - A tile row that straddles two lines costs both (a 512x512x448 int8 matmul ran 28%
///   slower with a's rows 500 bytes apart than 448). The copy's rows end in zeros up to the
///   next line, and the kernel takes them as a's k: b's panels hold zeros there too (they
///   are written whole, to a multiple of 64 bytes of k), so the product is the same and no
///   k step is partial (its staging had cost as much again).
/// - The block row at M's edge staged all of its rows of a for every block of it: int8
///   500x500x500 took 152 us against 106 for 512x500x500 (2 threads, AMX Xeon). The copy's
///   rows past M are zeros, and the kernel runs the whole blocks; their rows of c land in
///   the rows past M of c's allocation, which the caller does not see (MatmulCall::result).
/// The copy moves M x K elements against M x N x K multiply-adds: from 384 columns of b on
/// it paid (against torch: int8 512x512x500 0.73-0.80 -> 0.86x, 1000^3 0.86-0.88 ->
/// 0.95-1.10x, 500^3 0.60 -> 0.65x; bf16 1000^3 1.24-1.27 -> 1.42-1.44x, before the zeros),
/// at 256 columns it lost (int8 256x256x250 0.61 -> 0.48x).
CopyOfA onWholeLinesAndBlocks(const at::Tensor &a, int64_t n, bool onTiles) {
  constexpr int64_t kCacheLine = 64, kColumnsWorthACopy = 384;
  int64_t m = a.size(0), k = a.size(1), bytes = a.element_size();
  int64_t rows = tile::binding::rowsOfWholeTileBlocks(m);
  bool linesOff = (a.stride(0) * bytes) % kCacheLine != 0;
  if (!onTiles || n < kColumnsWorthACopy || (!linesOff && rows == m))
    return {a, {}};
  auto [view, linePitch] = scratchRowsOnWholeLines(a, rows);
  int64_t pitch = linePitch;
  const char *from = static_cast<const char *>(a.const_data_ptr());
  int64_t fromStride = a.stride(0) * bytes;
  auto writeRows = [=](char *to, int64_t first, int64_t last) {
    int64_t inside = std::max<int64_t>(0, std::min(last, m) - first);
    tile::runtime::copyRows(from + first * fromStride, fromStride, inside, k * bytes,
                            to + first * pitch, pitch);
    zeroRows(to, pitch, std::max(first, m), last);
  };
  return {view, writeRows, rows * pitch};
}

/// A copy of an a whose k is not contiguous (a transposed, as the x^T of a weight's
/// gradient), in rows of k as the kernels read a fastest: the tiles read only such rows, and
/// the vector kernel, broadcasting a's elements down k, read a cache line per element
/// (float32 1024^3 with a transposed ran at 0.48x of its speed on rows, bfloat16 at 0.07x,
/// int8 at 0.03x; 2-core Xeon). With the copy, against torch at 1024^3: float32 0.48 ->
/// 0.95x, bfloat16 0.10 -> 1.25x, int8 0.04 -> 1.02x. The rows lie whole cache lines apart,
/// zeros past k, and on the tiles zeros fill the rows up to whole blocks (see
/// onWholeLinesAndBlocks). The copy moves M x K elements against M x N x K multiply-adds,
/// at about 20 GB/s on two threads (torch's a.contiguous() took 4.5 times as long).
CopyOfA rowsOfA(const at::Tensor &a, bool onTiles) {
  int64_t m = a.size(0), k = a.size(1), bytes = a.element_size();
  int64_t rows = onTiles ? tile::binding::rowsOfWholeTileBlocks(m) : m;
  auto [rowsView, linePitch] = scratchRowsOnWholeLines(a, rows);
  int64_t rowBytes = k * bytes, pitch = linePitch;
  auto writeRows = [=](char *to, int64_t first, int64_t last) {
    int64_t inside = std::max<int64_t>(0, std::min(last, m) - first);
    if (inside > 0 && a.stride(0) == 1) {
      // a transposed: its columns are the rows of a row-major matrix.
      const char *from = static_cast<const char *>(a.const_data_ptr());
      tile::runtime::transposeMatrix(from + first * bytes, a.stride(1) * bytes, k, inside, bytes,
                                     to + first * pitch, pitch);
    } else if (inside > 0) {
      at::Tensor view = at::from_blob(to, {rows, pitch / bytes}, {pitch / bytes, 1}, a.options());
      view.narrow(0, first, inside).narrow(1, 0, k).copy_(a.narrow(0, first, inside));
    }
    for (int64_t r = first; r < first + inside; ++r)
      std::memset(to + r * pitch + rowBytes, 0, size_t(pitch - rowBytes));
    zeroRows(to, pitch, std::max(first, m), last);
  };
  // The tiles take the zeros past k as a's k, as on onWholeLinesAndBlocks's copy.
  return {onTiles ? rowsView : rowsView.narrow(1, 0, k), writeRows, rows * pitch};
}

} // namespace

void tile::binding::prepareMatmul(MatmulCall &call, const char *op, const at::Tensor &a,
                                  const at::Tensor &b, std::optional<double> negativeSlope,
                                  std::optional<at::ScalarType> outDtype,
                                  const std::optional<at::Tensor> &callerBias, const Target &target,
                                  bool contiguousRowsOfB, bool termsOfHalves,
                                  std::optional<runtime::ScratchUse> cScratch,
                                  const std::optional<at::Tensor> &activation) {
  at::ScalarType out =
      termsOfHalves ? checkMatmulCall(op, a, b, negativeSlope.has_value(), at::kFloat, std::nullopt)
                    : checkMatmulCall(op, a, b, negativeSlope.has_value(), outDtype, callerBias);
  if (termsOfHalves && outDtype)
    out = *outDtype;
  if (activation)
    checkActivation(op, *activation, a, b, out);
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  // A large enough CPU call reads b from a copy in panels, made from any layout, and so
  // does every call on AMX tile registers and every call whose b's rows are not contiguous
  // (b transposed; see specify()). On the CPU an a whose k is not contiguous is read from
  // a copy in rows (rowsOfA).
  bool cpu = target.kind == TargetKind::Cpu;
  bool copyRowsOfA = cpu && a.stride(1) != 1 && k > 1 && m > 0;
  bool unitKOfA = a.stride(1) == 1 || k == 1 || copyRowsOfA;
  bool tileDtype = a.scalar_type() == at::kBFloat16 || a.scalar_type() == at::kChar;
  bool onTiles =
      cpu && tileDtype && usesMatrixTiles(target, specDtype(a.scalar_type()), unitKOfA, m, k);
  // A few rows of a against a b whose k is contiguous (b transposed: x @ W^T for a few
  // tokens through a Linear's weight) take dots along k, reading b once in place (see
  // RowDots.cpp in the compiler), where a copy into panels transposed all of b for a few
  // rows of products.
  bool rowDots = cpu && !onTiles && takesDotsAlongK(target, a, b);
  bool stridedB = cpu && b.stride(1) != 1 && n > 1 && k > 0 && !rowDots;
  bool panels = cpu && !rowDots &&
                (onTiles || stridedB ||
                 packsBIntoPanels(
                     m, n, k, b.element_size(), dotGroupOfK(target, specDtype(a.scalar_type())) > 1,
                     ops::readsFewRowsInPlace(target, m, n, k, specDtype(a.scalar_type()))));
  call.op = op;
  call.rows = m;
  // A transposed a of 32 KB or more is copied in bands of rows that the launch's threads
  // then multiply (launchCpuInRowBands), each the rows it wrote: split by block columns,
  // each thread read all of a, half of it from the other core's cache (2-core Xeon,
  // float32 128^3 with a transposed: 37 us, in bands 21, a contiguous a 16). Below, the
  // launch splits the block columns as for any a (float32 64^3: 6.6 us against 9.4 in
  // bands). Either way the launch's tasks write the copy (see matmulCpu).
  constexpr int64_t kTransposedBytesWorthBands = int64_t(32) << 10;
  call.aInRowBands = copyRowsOfA && m * k * a.element_size() >= kTransposedBytesWorthBands;
  CopyOfA aForKernel = copyRowsOfA ? rowsOfA(a, onTiles) : onWholeLinesAndBlocks(a, n, onTiles);
  call.a = aForKernel.view;
  call.writeRowsOfA = std::move(aForKernel.writeRows);
  call.aCopyBytes = aForKernel.bytes;
  // A copy of up to 128 KB is written by each of the launch's threads for itself, which
  // then runs whole block columns (packing the panels they read) and reads only what it
  // wrote, in one parallel region with no barrier between the copies and the programs. A
  // copy shared by the threads had each read half of it, or half of the panels, from the
  // other core's cache, and its own parallel region had woken the threads once more.
  // Against a shared copy, a transposed: on the tiles (2-core Xeon, two alternations) int8
  // 256^3 42.0/33.0 -> 26.1/30.2 us, 320^3 59.5/53.4 -> 37.8/46.1, bfloat16 256^3
  // 51.9/52.2 -> 37.8/45.0; on a znver5 (2 threads, three alternations, against torch)
  // int8 128^3 0.69-0.82 -> 1.14-1.19x, 256^3 0.72-0.77 -> 0.91-1.03x, 320^3 0.74-0.79 ->
  // 0.86-0.93x, bfloat16 128^3 1.05-1.35 -> 1.67-1.87x, 256^3 1.14-1.17 -> 1.27-1.34x,
  // float32 96^3-180^3 unchanged. Larger copies took longer to write twice than the reads
  // they saved (int8 500^3 on the tiles: 122-154 -> 172-192 us): those keep one copy.
  constexpr int64_t kCopyPerThreadBytes = int64_t(128) << 10;
  // int8 on the vector kernel takes a copy per thread up to 1 MB: its byte transposes run
  // on AVX-512's registers (see runtime/Transpose.cpp), and the shared copy's own parallel
  // region cost more (znver5, a transposed, three alternations against _int_mm: 448^3
  // 0.82-0.94 -> 0.89-0.92x, 500^3 0.89-0.92 -> 0.97-1.02x, 700^3 0.93-0.94 ->
  // 0.97-0.98x, 1000^3 0.90-0.93 -> 0.94-0.96x, 1024^3 0.96-0.98 -> 0.97-1.00x). bfloat16
  // ran 1-2% slower so at 500^3 and 700^3, float32 256^3 8% slower.
  constexpr int64_t kByteCopyPerThreadBytes = int64_t(1) << 20;
  int64_t copyPerThread =
      a.element_size() == 1 && !onTiles ? kByteCopyPerThreadBytes : kCopyPerThreadBytes;
  call.aCopyPerThread = call.writeRowsOfA && aForKernel.bytes <= copyPerThread;
  // The kernel runs the rows of the copy (a whole number of blocks); c has as many.
  m = call.a.size(0);
  call.target = &target;
  // Otherwise the CPU microkernel reads b a row at a time as one vector load; rows that
  // are not contiguous would be gathered element by element, ~25x slower than copying b
  // once, which costs K*N moves against M*N*K multiply-adds. A transposed b copied into
  // panels (a transpose per panel) ran float32 512x256x1024 at 1.02-1.04x of torch where
  // b.contiguous() had run it at 0.75x; bfloat16 512^3 0.85 -> 1.65x, int8 0.60 -> 0.98x.
  call.b =
      panels || rowDots || !contiguousRowsOfB || b.stride(1) == 1 || n == 1 ? b : b.contiguous();
  // Rows of b a multiple of 4 KB apart fall into the same cache sets: the microkernel,
  // walking down a panel of b one row after the next, evicts its own rows from L1 and L2
  // (2048^3 f32 ran at 0.74x of MKL on a 2-core znver4, bf16 at 0.62x). A copy of b with
  // its rows one cache line further apart (K*N moves against M*N*K multiply-adds; the
  // kernel reads b's row stride at run time) ran both about 30% faster, copy included.
  constexpr int64_t kCacheLine = 64, kAliasingStride = 4096, kRowsWorthACopy = 256;
  int64_t rowBytes = call.b.stride(0) * call.b.element_size();
  if (contiguousRowsOfB && !panels && call.b.stride(1) == 1 && rowBytes % kAliasingStride == 0 &&
      m >= kRowsWorthACopy && k >= kRowsWorthACopy && n >= kRowsWorthACopy) {
    at::Tensor padded =
        at::empty({k, n + kCacheLine / call.b.element_size()}, call.b.options()).narrow(1, 0, n);
    padded.copy_(call.b);
    call.b = padded;
  }
  call.c =
      cScratch ? scratchTensor(*cScratch, {m, n}, out) : at::empty({m, n}, a.options().dtype(out));
  if (m == 0 || n == 0)
    return;

  // int8 on vpdpbusd, b in panels of quads, K up to 256, past 1024 rows: the kernel takes
  // a + 128 as it is (unsigned_a) and its bias takes off what that adds, -128 times b's
  // column sums, summed here once. Each 4 x 64 program had summed its rows of a inside its
  // K loop and reduced them after it, the programs of every block column the same rows
  // again. Against that, in one process (znver5, 2 threads, 7-9 interleaved rounds, tile's
  // time old / new, _int_mm): 2048^2x128 661 / 637 us (583), 4096x1024x128 653 / 630 (584),
  // 2048x512x64 97.3 / 90.4 (79.3), 1536^2x128 380 / 361 (330), 8192x256x32 131 / 121 (121),
  // 2048^2x16 387 / 311 (391), 2048^2x4 502 / 327 (384), 2048^2x256 1182 / 1169 (1086);
  // b transposed 2048^2x128 699 / 655 (571). There the launch runs groups of 16 rows, each
  // walking every block column. Up to 1024 rows it lost or tied: in one group 256^2x64
  // 8.7 / 9.3 us, 1024^2x128 157 / 160, 1024^2x4 39 / 55, 1024x2048x16 94 / 86; in the
  // 16-row groups of results of 4096 columns or more (see MatmulConfig) 1024x4096x64
  // 457-468 / 445-457, 1024x8192x64 9.6-9.8 / 10.0-10.2 ms. Past K = 256 the sums cost
  // nothing: the loop runs at vpdpbusd's rate either way.
  constexpr int64_t kShortInt8K = 256, kRowsOfOneGroup = 1024;
  std::optional<at::Tensor> bias = callerBias;
  bool unsignedA = cpu && !onTiles && panels && !activation && a.scalar_type() == at::kChar &&
                   unitKOfA && dotGroupOfK(target, "i8") == 4 && k <= kShortInt8K &&
                   m > kRowsOfOneGroup;
  if (unsignedA) {
    at::Tensor offsets = scratchTensor(runtime::ScratchUse::UnsignedAOffsets, {n}, at::kInt);
    runtime::unsignedAOffsets(b.const_data_ptr<int8_t>(), k, n, b.stride(0), b.stride(1),
                              callerBias ? callerBias->const_data_ptr() : nullptr,
                              callerBias ? int(callerBias->element_size()) : 0,
                              callerBias ? callerBias->stride(0) : 0,
                              offsets.mutable_data_ptr<int32_t>());
    bias = offsets;
  }

  auto aOperand = operandOf(call.a), bOperand = operandOf(call.b), cOperand = operandOf(call.c);
  std::optional<runtime::StridedOperand> biasOperand;
  if (bias)
    biasOperand = operandOf(*bias);
  const runtime::StridedOperand *biasOrNone = biasOperand ? &*biasOperand : nullptr;
  std::optional<runtime::StridedOperand> activationOperand;
  if (activation)
    activationOperand = operandOf(*activation);
  const runtime::StridedOperand *activationOrNone =
      activationOperand ? &*activationOperand : nullptr;
  int64_t indexBits =
      runtime::matmulIndexBits(m, n, k, aOperand, bOperand, cOperand, biasOrNone, activationOrNone);
  runtime::CallSignature &signature = call.signature;
  signature[kOp] = activation ? kLeakyReluBackwardOp : negativeSlope ? kLeakyReluOp : kMatmulOp;
  signature[kInput] = static_cast<int64_t>(a.scalar_type());
  signature[kOutput] = static_cast<int64_t>(out);
  signature[kEpilogueOperand] = bias         ? static_cast<int64_t>(bias->scalar_type())
                                : activation ? static_cast<int64_t>(activation->scalar_type())
                                             : -1;
  signature[kIndexBits] = indexBits;
  signature[kM] = m;
  signature[kN] = n;
  signature[kK] = k;
  // The GPU lowering picks its shared-memory layouts and access widths by the strides and
  // the alignment. The CPU microkernel reads its operands through run-time strides, but
  // whether the rows of a and b are contiguous decides how (pairs or quads of k from a's
  // rows with vdpbf16ps / vpdpbusd, b's rows as vector loads): knowing it, a kernel holds
  // only the path its call takes, where it held every path behind run-time checks; c's
  // rows are always contiguous (its own output).
  // Panels of b have unit column stride, whatever b's own layout. Bit 6, the bias's
  // stride: a contiguous bias is one vector load per block row, where a run-time stride
  // kept a gather beside it in every kernel.
  int64_t epilogueUnitStrides = bias && (bias->stride(0) == 1 || n == 1) ? 1 << 6 : 0;
  // Bits 7 and 8: the activation's strides (rows, columns), as a's, b's and c's.
  if (activationOperand)
    epilogueUnitStrides |= runtime::unitStrideBits({&*activationOperand}) << 7;
  if (target.kind == TargetKind::Cpu) {
    // float16's bfloat16 terms are such a copy too, written by the launch's threads.
    // A copy per thread is read as a is in place: from the core's own cache.
    bool aCopied =
        termsOfHalves || (call.a.const_data_ptr() != a.const_data_ptr() && !call.aCopyPerThread);
    signature[kCopies] = (aCopied ? kCopyOfA : 0) | (stridedB ? kPanelsOfStridedB : 0) |
                         (unsignedA ? kUnsignedA : 0);
    signature[kUnitStrides] =
        (runtime::unitStrideBits({&aOperand, &bOperand, &cOperand}) & kUnitColumnStridesOfAB) |
        kUnitColumnStrideOfC | (panels ? kUnitColumnStrideOfB : 0) |
        (rowDots ? kUnitRowStrideOfB : 0) | epilogueUnitStrides;
  } else {
    signature[kUnitStrides] =
        runtime::unitStrideBits({&aOperand, &bOperand, &cOperand}) | epilogueUnitStrides;
    int64_t sizes = (m % 16 == 0 ? 1 : 0) | (n % 16 == 0 ? 2 : 0) | (k % 16 == 0 ? 4 : 0);
    // Bit 6: the bias's data 16-byte aligned, as fresh allocations are.
    int64_t alignedBias =
        bias && reinterpret_cast<uintptr_t>(bias->const_data_ptr()) % 16 == 0 ? 1 << 6 : 0;
    // Bit 7: the activation's data and strides 16-byte aligned.
    int64_t alignedActivation =
        activationOperand ? runtime::divisibility16Bits({&*activationOperand}) << 7 : 0;
    int64_t aligned16 = runtime::divisibility16Bits({&aOperand, &bOperand, &cOperand});
    // Bits 8 and 9: a's and b's data and strides 4-byte aligned where they are not
    // 16-byte aligned (their kernel copies them in pieces of 4 or 8 bytes).
    int64_t aligned4 = runtime::alignedBits({&aOperand, &bOperand}, 4) & ~aligned16 & 0b11;
    signature[kDivisibility] =
        aligned16 | sizes << 3 | alignedBias | alignedActivation | aligned4 << 8;
  }
  // float32 on NVIDIA follows torch's float32 matmul precision, as torch.matmul does:
  // 'highest' keeps exact FMAs, 'high' and 'medium' let cuBLAS (and so tile) use TF32.
  signature[kTf32] = target.kind == TargetKind::Cuda && a.scalar_type() == at::kFloat
                         ? (at::globalContext().allowTF32CuBLAS() ? 1 : 0)
                         : -1;
  signature[kDevice] = a.device().index();

  if (bias)
    call.bias = *bias;
  int64_t cStrides[2] = {call.c.stride(0), call.c.stride(1)};
  std::optional<float> slope;
  if (negativeSlope)
    slope = static_cast<float>(*negativeSlope);
  if (activation)
    call.activation = *activation;
  call.arguments.pack(aOperand, bOperand, call.c.data_ptr(), cStrides, biasOrNone, slope, indexBits,
                      activationOrNone);
}

void tile::binding::MatmulCall::specify() {
  const runtime::CallSignature &signature = this->signature;
  spec.op = signature[kOp] == kLeakyReluBackwardOp ? "matmul_leaky_relu_backward"
            : signature[kOp] == kLeakyReluOp       ? "matmul_leaky_relu"
                                                   : "matmul";
  spec.dtypes = {specDtype(a.scalar_type()), specDtype(c.scalar_type())};
  if (bias.defined())
    spec.dtypes.push_back(specDtype(bias.scalar_type()));
  if (activation.defined())
    spec.dtypes.push_back(specDtype(activation.scalar_type()));
  spec.config = ops::defaultMatmulConfig(*target, signature[kM], signature[kN], signature[kK],
                                         spec.dtypes[0]);
  spec.config["index_bits"] = signature[kIndexBits];
  spec.config["unit_strides"] = signature[kUnitStrides];
  if (target->kind != TargetKind::Cpu)
    spec.config["divisibility_16"] = signature[kDivisibility];
  if (target->kind == TargetKind::Cpu && (signature[kUnitStrides] & kUnitRowStrideOfB)) {
    // Dots along k, one vector of k of each row of a and column of b per step. A block
    // takes 8 columns, 8 runs of b streaming at once (2 threads, znver5, against torch at
    // 1x4096x4096, 1x11008x4096 and 1x4096x11008: int8 16 columns 0.80-0.97x of _int_mm,
    // 8 0.97-1.34x, 4 0.88-1.17x; bf16 16 1.8-3.1x of oneDNN, 8 2.1-4.2x; float32 4 and
    // 8 2.2-2.8x of MKL), and runs its rows two at a time against them (16 sums), the
    // columns' runs of k staying in the L1 for the next two rows. Against blocks of 16 sums
    // in one pass (2 x 8, 4 x 4, 8 x 2), 8 rows x 4096 x 4096 and x 11008 x 4096, medians
    // of three alternations: int8 251 -> 215 and 1037 -> 838 us, bf16 645 -> 463 and 2857
    // -> 2184, float32 2512 -> 1435 and 7385 -> 4675.
    int64_t m = signature[kM];
    // Every row of a in one block row up to 32 (the rows past M read the first), so that
    // b is read once; past 32, the block rows of a column run one after another
    // (GROUP_M), b's runs in the L2 for the next. Blocks of 64 rows ran 1-3% faster (bf16
    // 64 x 4096 x 4096, float32 128 x 4096 x 4096) but took a cold first call from 50 to
    // 71 ms (bf16 64 x 1024 x 1024); 16 rows ran 5% slower.
    constexpr int64_t kMostRowsInABlock = 32, kColumns = 8;
    int64_t rows = std::min<int64_t>(
        kMostRowsInABlock, int64_t(1)
                               << (64 - __builtin_clzll(uint64_t(std::max<int64_t>(m, 2) - 1))));
    spec.config["BLOCK_M"] = m == 1 ? 1 : rows;
    spec.config["BLOCK_N"] = kColumns;
    spec.config["GROUP_M"] = (m + kMostRowsInABlock - 1) / kMostRowsInABlock;
    // Each BLOCK_K chunk ends in a sum across the lanes of every row and column: the
    // largest chunk, where bf16's default (256) spent 16 such sums per 8 steps of k
    // (x 4096 x 4096, alternating: bf16 2-8 rows 0.68-1.0 -> 0.95-1.68x of oneDNN, 1 row
    // 1.65-1.76 -> 2.2-2.4x; float32 1-8 rows 1.37-2.29 -> 1.66-3.33x of MKL).
    constexpr int64_t kLargestChunk = 1024;
    spec.config["BLOCK_K"] = kLargestChunk;
  } else if (target->kind == TargetKind::Cpu) {
    bool unitKOfA = signature[kUnitStrides] & kUnitColumnStrideOfA;
    // AMX multiplies b only in groups of k: where a call takes the tile registers, b is
    // always read from grouped panels, whatever its size.
    if (signature[kCopies] & kUnsignedA) {
      // The bias holds b's column sums (prepare): the kernel must take a + 128, from b's
      // panels of quads, which int8's default blocks (16 to 64 columns) always allow.
      spec.config["packed_b"] = panelGroupFor(*target, spec.dtypes[0], unitKOfA, spec.config);
      TORCH_CHECK(spec.config["packed_b"] == 4, op,
                  ": internal error: an int8 kernel that reads a + 128 got b in groups of ",
                  spec.config["packed_b"], ", not 4");
      spec.config["unsigned_a"] = 1;
    } else if (usesMatrixTiles(*target, spec.dtypes[0], unitKOfA, signature[kM], signature[kK])) {
      // a.size(1): the kernel's k, which a copy of a pads with zeros to whole cache lines.
      spec.config =
          ops::withMatrixTiles(spec.config, signature[kM], signature[kN], signature[kK],
                               spec.dtypes[0], (signature[kCopies] & kCopyOfA) != 0, a.size(1));
      spec.config["packed_b"] = panelGroupFor(*target, spec.dtypes[0], unitKOfA, spec.config);
    } else if ((signature[kCopies] & kPanelsOfStridedB) ||
               packsBIntoPanels(signature[kM], signature[kN], signature[kK], a.element_size(),
                                dotGroupOfK(*target, spec.dtypes[0]) > 1,
                                ops::readsFewRowsInPlace(*target, signature[kM], signature[kN],
                                                         signature[kK], spec.dtypes[0]))) {
      spec.config["packed_b"] = panelGroupFor(*target, spec.dtypes[0], unitKOfA, spec.config);
    }
  }
  if (signature[kTf32] >= 0)
    spec.config["allow_tf32"] = signature[kTf32];
  if (target->kind == TargetKind::Cpu)
    chooseCpuGridOrder(spec.config, signature[kM]);
  programs = runtime::matmulPrograms(spec.config, signature[kM], signature[kN]);
  TORCH_CHECK(programs <= std::numeric_limits<int32_t>::max(), op, ": a ", signature[kM], "x",
              signature[kN], " result needs more than 2**31 program instances");
}

bool tile::binding::packsBIntoPanels(int64_t m, int64_t n, int64_t k, int64_t elementBytes,
                                     bool groupsOfK, bool fewRowsInPlace) {
  // Measured on a 2-core znver4 (panels against b as given, same process, interleaved):
  // - b of 4 MB and more, past the L2: f32 1.07x at 1024^3, 1.11x at 2048^3, 1.40x at
  //   4096^3, 1.13-1.79x with M from 64 to 512 at K = N = 4096; bf16 1.02-1.09x at 2048^3
  //   and 1.73x at 4096^3, int8 1.27x and 1.85x. Below it, bf16 lost 5% at 1024^3.
  // - int8 rows of a 32-column block are 32 bytes, and a panel puts two in a cache line
  //   where b's own rows take one each: 1.28x at 1024^3 and 1.04x at 512^3, but 0.93x at
  //   128x1024x1024.
  // - f32 rows of b 2 KB or more apart (N >= 512) hold a block's 128-byte runs in few
  //   cache sets, which the block's K rows overflow: on a 2-core Xeon (48 KB L1d, 2 MB L2,
  //   one thread) panels ran 1024x1024x256 at 158 GFLOP/s against 146, 1024x1024x512
  //   152 against 132, 512^3 159 against 155, 256x4096x64 134 against 116; at 256^3 (1 KB
  //   apart) 165 against 170.
  // - f32 rows of b that are not whole cache lines apart (N not a multiple of 16) make
  //   every vector load of a row of b straddle two lines, and its block column at N's
  //   edge takes the masked edge path; panels (written whole) take neither: against MKL
  //   (2 threads, Xeon) 500^3 0.59 -> 1.00x, 200^3 0.46 -> 0.82x, 100^3 0.48 -> 0.56x,
  //   72^3 0.34 -> 0.63x. Whole lines but not whole 32-column blocks (AVX-512 blocks are
  //   64 columns wide, or 32 below 768 where 64 would leave most of one past N) still
  //   leave that edge column to the masked path, which took a 112^3 call longer than
  //   128^3: with panels, two alternations (2 threads, against MKL), 112^3 0.54-0.55 ->
  //   0.85-0.93x, 176^3 0.57-0.58 -> 0.73-0.74x, 240^3 0.57-0.58 -> 0.87-1.00x, 144^3
  //   0.66-0.68 -> 0.79x; 96^3 and 160^3 (whole 32-column blocks) lost with them (1.07 ->
  //   0.84x) and keep b as given.
  // - Where the host's dot-product instruction takes b's k in groups (vdpbf16ps: bf16
  //   pairs, vpdpbusd: int8 quads), b read in place has each group's rows interleaved by
  //   the kernel at every block: on a 2-core znver5 (against torch, 2 threads) panels took
  //   int8 256^3 0.53 -> 0.90x, 500^3 0.13 -> 0.81x, 1000^3 0.17 -> 0.79x, 64x512x512
  //   0.69 -> 1.05x, bf16 500^3 0.28 -> 0.96x, 1000^3 0.36 -> 1.06x, 1024^3 0.61 ->
  //   1.17x. Below 64 rows they lost there too (bf16 32x1024x1024 1.31 -> 1.00x), except
  //   past the L2, where each of a few blocks' walks down b's rows takes a TLB miss per
  //   row (int8 1x4096x4096 0.75 -> 0.97x, 16x4096x4096 0.41 -> 1.08x, 32x4096x4096 0.24
  //   -> 1.00x, 16x2048x2048 0.62 -> 1.11x; bf16 16x2048x2048 0.60 -> 1.25x,
  //   32x4096x4096 0.58 -> 0.77x, 16x4096x4096 0.90 -> 0.79x).
  // - With the copy's rows asked for ahead and each task's panels its own (see
  //   PanelPacking and launchCpuInColumnBands), grouped b of 1 MB or more (the L2 of AMD's
  //   Zen 4 and 5 cores) repays the copy from 17 rows (2 threads, znver5, alternating):
  //   int8 17x1024x1024 0.44-0.50 -> 0.89-1.00x of _int_mm, 32x1024x1024 0.74-0.81 ->
  //   1.00-1.15x, 48x1024x1024 0.63-0.64 -> 0.99-1.04x, 32x2048x1024 0.42-0.45 ->
  //   1.01-1.09x; bf16 17x1024x1024 0.71-0.73 -> 0.95x of oneDNN, 48x1024x1024 0.78-0.79 ->
  //   1.01-1.02x. 16 rows tied, 8 lost (int8 8x1024x1024 1.27 -> 0.92-1.06x), and so did
  //   bf16 32x512x512 (512 KB: 1.76-1.83 -> 1.30x).
  // - int8 interleaves four rows of b per group of k in place where bf16 interleaves two: with
  //   the blocks at the edges of b in place on the instruction too, int8 repays the copy
  //   from 17 rows at any size (2 threads, znver5, alternating; in place -> panels):
  //   32x512x512 18.8 -> 15.6 us, 48x500x500 31.8 -> 19.8, 32x256x256 6.7 -> 6.0, 31x100x100
  //   3.5 -> 3.2, 17x64x64 and 24x320x320 tied; 12x512x512 lost (8.6 -> 10.3). bf16 keeps b
  //   in place there (32x512x512 21.1 against 28.9 us on panels, 40x320x320 11.5 against 15.0).
  //   Past the L2, int8 repays it from 9 rows, whose 4-row blocks read b two to four times
  //   from L3: 16x2048x1024 142-146 -> 85-87 us, 12x2048x1024 99-115 -> 75-78, 16x4096x768
  //   198-223 -> 121-128, 16x2050x1000 107 -> 86-88 (0.57-0.75 -> 0.84-1.21x of _int_mm);
  //   at 1 MB they tie (16 rows) or lose (12x1024x1024 34-36 -> 40 us).
  // The copy moves K*N elements against M*N*K multiply-adds: too few rows of a (M < 64)
  // do not repay it, but for grouped b past the L2. Where blocks take all of a's few rows
  // and read each row of b once or twice (ops::readsFewRowsInPlace), b stays in place
  // there too: the copy was 3x the bytes that such a call streams.
  constexpr int64_t kRowsWorthPanels = 64, kPastTheL2 = int64_t(4) << 20;
  constexpr int64_t kRowsInPlace = 16, kPastAnL2 = int64_t(1) << 20, kInt8RowsInPlace = 8;
  constexpr int64_t kInt8Rows = 512, kInt8Bytes = int64_t(256) << 10;
  constexpr int64_t kConflictingPitch = 2048;
  int64_t bytes = k * n * elementBytes;
  if (fewRowsInPlace)
    return false;
  if (groupsOfK)
    return m >= kRowsWorthPanels || bytes >= kPastTheL2 ||
           (m > kRowsInPlace && (bytes >= kPastAnL2 || elementBytes == 1)) ||
           (elementBytes == 1 && m > kInt8RowsInPlace && bytes > kPastAnL2);
  if (m < kRowsWorthPanels)
    return false;
  constexpr int64_t kEdgeFreeColumns = 32;
  bool f32 = elementBytes == 4;
  return bytes >= kPastTheL2 || (f32 && n * elementBytes >= kConflictingPitch) ||
         (f32 && n % kEdgeFreeColumns != 0) ||
         (elementBytes == 1 && m >= kInt8Rows && bytes >= kInt8Bytes);
}

bool tile::binding::usesMatrixTiles(const Target &target, const std::string &inputDtype,
                                    bool unitKOfA, int64_t m, int64_t k) {
  // The tiles read a's rows 64 bytes of k at a time (its k unit-stride), 32 rows per
  // block: a call of fewer rows would leave the tiles mostly empty and still pay for the
  // panels of b. So does an int8 k of less than one such step, which every block stages
  // into a zero-padded copy: on the AMX Xeon (2 threads, alternating) the vector kernel
  // took 777x500x8 from 272-430 to 103 us, 1000x64x8 26-56 -> 16, 500x100x48 52-87 -> 31-34,
  // 256x256x32 27-59 -> 25-29. bf16 keeps the tiles at any k there (the vector kernel ran
  // 256x256x16 in 38-42 us against 22-24, 1000x256x24 187-204 against 121-142).
  constexpr int64_t kRowsWorthTiles = 32, kTileStepBytes = 64;
  bool shortInt8K = inputDtype == "i8" && k < kTileStepBytes;
  return hasCpuMatrixTiles(target, inputDtype) && unitKOfA && m >= kRowsWorthTiles && !shortInt8K;
}

at::Tensor tile::binding::scratchTensor(runtime::ScratchUse use, at::IntArrayRef sizes,
                                        at::ScalarType dtype) {
  int64_t bytes = c10::multiply_integers(sizes) * int64_t(c10::elementSize(dtype));
  return at::from_blob(runtime::threadScratch(use, bytes), sizes, at::TensorOptions().dtype(dtype));
}

bool tile::binding::multipliesTransposedProduct(const Target &target, const at::Tensor &a,
                                                const at::Tensor &b) {
  constexpr int64_t kFewestColumns = 256;
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != b.size(0) ||
      a.scalar_type() != b.scalar_type() || !a.device().is_cpu() || !b.device().is_cpu())
    return false;
  at::ScalarType dtype = a.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kChar)
    return false;
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  bool transposedB = b.stride(0) == 1 && b.stride(1) != 1;
  if (m < 2 || n < kFewestColumns || k < 2 || !transposedB || a.stride(1) != 1)
    return false;
  bool int8 = dtype == at::kChar;
  std::string name = specDtype(dtype);
  // On the matrix tiles (an AMX Xeon, 2 threads, b transposed, x 4096 x 4096 and x 11008 x
  // 4096, the transpose back included; alternating with the rule before, whose 9-31 rows
  // took dots along k and 32 and more the tiles with all of b transposed into panels):
  // bf16 8-64 rows 0.31-0.85 -> 0.93-2.03x of oneDNN, 96 0.44-0.51 -> 1.00-1.23x, 192
  // 0.64-0.74 -> 0.81-0.85x (256: 0.76-0.80 against 0.72-0.79); int8 9-64 rows
  // 0.48-1.10 -> 0.96-1.54x of _int_mm, 128 0.86-0.95 -> 1.18-1.34x, 256 1.09-1.13 ->
  // 1.23-1.44x. Dots along k kept int8's 8 rows (1.08-1.28x) and bf16's 1-4 (1.5-2.0x,
  // swapped 1.2-1.4x). The swapped call's rows, b's columns, fill the tiles' blocks.
  if (dtype != at::kFloat && usesMatrixTiles(target, name, /*unitKOfA=*/true, n, k))
    return m >= (int8 ? 9 : 8) && m <= (int8 ? 256 : 192);
  // On the vector kernel, past the rows that dots along k take (2-core znver5, two runs of
  // three alternations, x 4096 x 4096 and 128 x 11008 x 4096): float32 96-256 rows 1.4-2.1
  // -> 1.9-3.0x of MKL (96 rows 11.4-13.7 -> 8.0-9.6 ms), bf16 96-256 rows 0.81-1.03 ->
  // 0.90-1.25x of oneDNN (96 rows 4.3-5.1 -> 3.6-4.0 ms), int8 128-192 rows 1.14-1.21 ->
  // 1.20-1.39x of _int_mm. int8's 48 rows tied and 96 lost (1.23-1.33 -> 1.15-1.16x: the
  // swapped call's 96 columns fill two thirds of its second 64-column block).
  int64_t fewestRows = int8 ? 128 : rowDotRows(target, name) + 1;
  constexpr int64_t kMostRows = 256;
  if (rowDotRows(target, name) <= 0 || m < fewestRows || m > kMostRows)
    return false;
  // Later, with b's panels each task's own and their source rows asked for ahead, the swap
  // paid only where it saves a copy of b several times the copy of a and the transpose
  // back of c that it adds, and where a's rows fill the swapped call's blocks of columns
  // (znver5, 2 threads, b transposed, swapped against not in one process): float32
  // 96x4096x4096 9.6 against 15.1 ms, 256x4096x4096 23.7 against 26.4, 200x11008x4096 50.7
  // against 58.0 (224 columns computed for 200), bf16 256x4096x4096 9.8 against 10.5, int8
  // 192x4096x4096 3.76 against 3.86; but int8 130x4096x4096 3.81 against 2.92 ms (192
  // columns computed for 130), bf16 130x4096x4096 6.6 against 5.9, float32 130x1024x1024 756
  // against 650 us, 256x300x100 55 against 44, 130x500x3 18.0 against 8.1.
  constexpr int64_t kCopyOfBOverWhatTheSwapAdds = 4, kWastedColumnsPercent = 15;
  if (k * n < kCopyOfBOverWhatTheSwapAdds * m * (k + n))
    return false;
  int64_t swappedBlockN = ops::defaultMatmulConfig(target, n, m, k, name).at("BLOCK_N");
  int64_t swappedColumns = (m + swappedBlockN - 1) / swappedBlockN * swappedBlockN;
  return (swappedColumns - m) * 100 <= kWastedColumnsPercent * m;
}

bool tile::binding::takesDotsAlongK(const Target &target, const at::Tensor &a,
                                    const at::Tensor &b) {
  // (The host's features are looked up last, only for such layouts.) A b of 16 columns or
  // fewer (a classifier's few outputs) takes them at any number of rows in bf16 and int8:
  // one or two blocks of 8 columns, b read in place, where the row-major kernel copied b
  // into panels and ran blocks of 32 columns (bf16) or 16 (int8) (2 threads, znver5,
  // against the panels: bf16 2000x8x1000 128 -> 48 us, 2000x16x1000 128 -> 97,
  // 8000x16x256 130 -> 97, 200x16x1000 18 -> 11; int8 2000x8x1024 71 -> 26, 2000x16x1024
  // 71 -> 47). Three blocks of 8 lost (bf16 2000x17x1000 128 -> 143 us), and so did
  // float32, whose 16-column blocks fit such a b (2050x13x1000 148 -> 183).
  constexpr int64_t kFewColumns = 16;
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  return m >= 1 && n > 1 && k > 1 && b.stride(0) == 1 && b.stride(1) != 1 && a.stride(1) == 1 &&
         k >= fewestKForDots(a.scalar_type(), m) &&
         (m <= rowDotRows(target, specDtype(a.scalar_type())) ||
          (n <= kFewColumns && dotGroupOfK(target, specDtype(a.scalar_type())) > 1));
}

int64_t tile::binding::fewestKForDots(at::ScalarType dtype, int64_t m) {
  // Dots along k read each row and column a vector of k at a time and end each chunk in
  // sums across the lanes: a short k fills few lanes and pays the sums for them. There b
  // transposed into panels (a few KB at such k) and the row-major kernel win. 2 threads,
  // znver5, b transposed, dots -> panels: float32 40x512x5 16.9 -> 5.0 us, 8x4096x8 26.1 ->
  // 10.8, 16x1030x17 15.1 -> 8.7, 40x1024x64 25.4 -> 21.3 (40x1024x128 32.9 against 38.0,
  // 8x1024x32 8.3 against 9.4); bf16 8x1024x32 7.0 -> 4.7, 40x1024x128 22.6 -> 17.5
  // (24x1024x256 20.4 against 25.1); int8 8x1024x100 7.9 -> 5.4, 24x1024x512 31.2 -> 26.6;
  // float16 (whose other path is a float32 copy) 8x4096x8 41.2 -> 17.3, 40x512x5 22.7 ->
  // 7.1 (8x1024x32 9.1 against 19.1). One row takes them at any k.
  if (m <= 1)
    return 2;
  bool fewRows = m <= 16;
  switch (dtype) {
  case at::kFloat:
    return fewRows ? 32 : 128;
  case at::kBFloat16:
    return fewRows ? 64 : 256;
  case at::kChar:
    return fewRows ? 128 : 1024;
  default: // float16, widened to float32 as loaded
    return 32;
  }
}

int64_t tile::binding::rowDotRows(const Target &target, const std::string &inputDtype) {
  // Where dots along k (b read once, in place) still beat b's copy into panels: 2 threads,
  // znver5, b transposed, against the panels at x 4096 x 4096 and x 11008 x 4096: int8 32
  // rows 800 against 820-990 us, 48 1450-1600 against 1100-1230; bf16 64 rows 2670-2750
  // against 3350-3800, 128 5850 against 5220; float32 64 rows 6140-6340 against
  // 9250-10330. float32 128 rows won there too (12500-12900 against 15100-16200) but lost
  // on an AMX Xeon (31.3-46.6 ms against 23.7-36.9, 64 rows 15.5-18.0 against 15.5-16.3).
  // Past 64 rows the transposed product takes over (multipliesTransposedProduct), but its
  // few columns fill its blocks badly just past 64: against it, dots along k ran float32
  // 65 rows 7.9-8.2 -> 6.8-7.3 ms and 72 8.1-8.3 -> 7.2-8.0, bf16 65 3.3-3.9 -> 2.9-3.5
  // ms; at 80 they tied, at 96 they lost (float32 8.1 against 8.8-9.2 ms).
  constexpr int64_t kFloatRows = 72;
  if (inputDtype == "f32")
    return kFloatRows;
  // float16 widened as loaded (vcvtph2ps, F16C), then as float32: at every size measured,
  // where the float32 kernel reads float32 copies of a and b made on every call (2-core
  // znver5: 512 x 4096 x 4096 90.5 -> 47.3 ms, 1024^3 6.2 -> 5.7, 2048^3 50.5 -> 47.4).
  if (inputDtype == "f16")
    return target.hasFeature("f16c") ? std::numeric_limits<int64_t>::max() : 0;
  int64_t group = dotGroupOfK(target, inputDtype);
  return group == 2 ? kFloatRows : group == 4 ? 32 : 0;
}

int64_t tile::binding::dotGroupOfK(const Target &target, const std::string &inputDtype) {
  return inputDtype == "bf16" && target.hasFeature("avx512bf16") ? 2
         : inputDtype == "i8" && target.hasFeature("avx512vnni") ? 4
                                                                 : 1;
}

int64_t tile::binding::panelGroupFor(const Target &target, const std::string &inputDtype,
                                     bool unitKOfA, const std::map<std::string, int64_t> &config) {
  // The kernel's dot takes 16 lanes of 32 bits at a time, and a block's k whole groups.
  constexpr int64_t kDotLanes = 16;
  int64_t group = dotGroupOfK(target, inputDtype);
  if (!unitKOfA || config.at("BLOCK_N") % kDotLanes != 0 || config.at("BLOCK_K") % group != 0)
    return 1;
  return group;
}

tile::runtime::PanelLayout tile::binding::bPanelLayout(const MatmulCall &call, int64_t width,
                                                       int64_t group) {
  return runtime::PanelLayout{call.b.size(0), call.b.size(1), width, call.b.element_size(), group};
}

void tile::binding::packBIntoPanels(MatmulCall &call, const runtime::PanelLayout &layout,
                                    void *panels, const runtime::ParallelFor &parallelFor,
                                    int64_t tasks) {
  writeBPanels(call, layout, panels, [&](const runtime::PanelLayout &layout, void *panels) {
    runtime::packPanels(call.b.data_ptr(), call.b.stride(0), call.b.stride(1), layout, panels,
                        parallelFor, tasks);
  });
}

void tile::binding::packBPanelRange(const MatmulCall &call, const runtime::PanelLayout &layout,
                                    void *panels, int64_t first, int64_t last) {
  runtime::packPanelRange(call.b.const_data_ptr(), call.b.stride(0), call.b.stride(1), layout,
                          panels, first, last);
}

void tile::binding::writeBPanels(
    MatmulCall &call, const runtime::PanelLayout &layout, void *panels,
    const std::function<void(const runtime::PanelLayout &, void *)> &write) {
  write(layout, panels);
  call.arguments.useBPanels(panels, layout);
}
