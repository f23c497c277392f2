#include "runtime/TensorMap.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

using namespace tile::runtime;

namespace {

// cuTensorMapEncodeTiled's enumerations (cuda.h).
constexpr int kInterleaveNone = 0;
constexpr int kL2Promotion256B = 3; // the largest L2 sector promotion, as CUTLASS's loads use
constexpr int kOutOfBoundsZero = 0; // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: zeros past the edges

int swizzleCode(int swizzleBytes) {
  switch (swizzleBytes) {
  case 0: return 0;
  case 32: return 1;
  case 64: return 2;
  default: return 3; // 128
  }
}

} // namespace

int64_t tile::runtime::tensorMapElementBytes(TensorMapElement element) {
  switch (element) {
  case TensorMapElement::U8: return 1;
  case TensorMapElement::F16:
  case TensorMapElement::BF16: return 2;
  case TensorMapElement::F32: return 4;
  }
  return 0;
}

TensorMapPlan tile::runtime::planTensorMap(const StridedOperand &operand, int contiguousDim,
                                           TensorMapElement element, const uint32_t box[2],
                                           int swizzleBytes) {
  TensorMapPlan plan;
  auto refuse = [&](const std::string &why) {
    plan.refusal = why;
    return plan;
  };
  if (operand.dims != 2 || (contiguousDim != 0 && contiguousDim != 1))
    return refuse("a tensor map here describes a matrix along one of its 2 dimensions");
  if (tensorMapElementBytes(element) != operand.elementBytes)
    return refuse("the map's element type is " + std::to_string(tensorMapElementBytes(element)) +
                  " bytes wide, the operand's " + std::to_string(operand.elementBytes));
  int outerDim = 1 - contiguousDim;
  int64_t bytes = operand.elementBytes;
  auto address = reinterpret_cast<uintptr_t>(operand.data);
  if (address % 16 != 0) {
    std::ostringstream where;
    where << "its data starts at 0x" << std::hex << address << ", not on a 16-byte boundary";
    return refuse(where.str());
  }
  int64_t inner = operand.sizes[contiguousDim], outer = operand.sizes[outerDim];
  if (inner <= 0 || outer <= 0)
    return refuse("it is empty");
  if (inner > (int64_t(1) << 32) || outer > (int64_t(1) << 32))
    return refuse("a dimension exceeds 2^32 elements");
  if (operand.strides[contiguousDim] != 1 && inner != 1)
    return refuse("dimension " + std::to_string(contiguousDim) + " has stride " +
                  std::to_string(operand.strides[contiguousDim]) +
                  ", not 1 (a transposed or strided view)");
  // A single row's stride never moves an address: any legal one describes it.
  int64_t rowBytes = (inner * bytes + 15) / 16 * 16;
  int64_t strideBytes = outer == 1 ? rowBytes : operand.strides[outerDim] * bytes;
  if (strideBytes % 16 != 0)
    return refuse("dimension " + std::to_string(outerDim) + " steps " + std::to_string(strideBytes) +
                  " bytes, not a multiple of 16");
  if (strideBytes < inner * bytes)
    return refuse("its rows overlap (a stride of " + std::to_string(strideBytes) + " bytes for rows of " +
                  std::to_string(inner * bytes) + ")");
  if (strideBytes >= (int64_t(1) << 40))
    return refuse("a stride exceeds 2^40 bytes");
  if (swizzleBytes != 0 && swizzleBytes != 32 && swizzleBytes != 64 && swizzleBytes != 128)
    return refuse("swizzle " + std::to_string(swizzleBytes) + " bytes: 0, 32, 64 or 128");
  for (int d = 0; d < 2; ++d)
    if (box[d] < 1 || box[d] > 256)
      return refuse("box dimension " + std::to_string(d) + " of " + std::to_string(box[d]) +
                    " elements: 1 to 256");
  if (box[0] * bytes % 16 != 0)
    return refuse("a box row of " + std::to_string(box[0] * bytes) + " bytes, not a multiple of 16");
  if (swizzleBytes != 0 && box[0] * bytes > swizzleBytes)
    return refuse("a box row of " + std::to_string(box[0] * bytes) + " bytes is wider than the " +
                  std::to_string(swizzleBytes) + "-byte swizzle");
  plan.shape.address = address;
  plan.shape.element = element;
  plan.shape.elementBytes = bytes;
  plan.shape.sizes[0] = uint64_t(inner);
  plan.shape.sizes[1] = uint64_t(outer);
  plan.shape.outerStrideBytes = uint64_t(strideBytes);
  plan.shape.box[0] = box[0];
  plan.shape.box[1] = box[1];
  plan.shape.swizzleBytes = swizzleBytes;
  return plan;
}

EncodedTensorMap TensorMapCache::get(const TensorMapShape &shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto found = maps_.find(shape); found != maps_.end())
    return found->second;
  if (!driver_.tensorMapEncodeTiled)
    throw std::runtime_error(driver_.name + " driver " + driver_.path +
                             " has no cuTensorMapEncodeTiled (tensor maps need CUDA 12 or later)");
  EncodedTensorMap map;
  uint32_t elementStrides[2] = {1, 1};
  uint64_t strides[1] = {shape.outerStrideBytes};
  if (int status = driver_.tensorMapEncodeTiled(
          map.bytes, int(shape.element), 2, reinterpret_cast<void *>(shape.address), shape.sizes,
          strides, shape.box, elementStrides, kInterleaveNone, swizzleCode(shape.swizzleBytes),
          kL2Promotion256B, kOutOfBoundsZero))
    throw std::runtime_error(driver_.name + " tensor map encoding failed for a " +
                             std::to_string(shape.sizes[1]) + "x" + std::to_string(shape.sizes[0]) +
                             " matrix with box " + std::to_string(shape.box[1]) + "x" +
                             std::to_string(shape.box[0]) + ": " +
                             (driver_.describe ? driver_.describe(driver_, status)
                                               : "status " + std::to_string(status)));
  ++encodes_;
  // Starting over keeps a run over ever new buffers bounded; maps are returned by value,
  // so none that a caller holds is freed under it.
  if (maps_.size() >= capacity_)
    maps_.clear();
  maps_.emplace(shape, map);
  return map;
}
