#include "runtime/MatmulArguments.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

using namespace tile::runtime;

int64_t StridedOperand::maxOffset() const {
  int64_t offset = 0;
  for (int64_t d = 0; d < dims; ++d)
    offset += std::max<int64_t>(sizes[d] - 1, 0) * strides[d];
  return offset;
}

int64_t tile::runtime::unitStrideBits(std::initializer_list<const StridedOperand *> operands) {
  int64_t bits = 0, bit = 0;
  for (const StridedOperand *operand : operands)
    for (int64_t d = 0; d < 2; ++d, ++bit)
      if (operand->strides[d] == 1 || operand->sizes[d] == 1)
        bits |= int64_t(1) << bit;
  return bits;
}

int64_t tile::runtime::divisibility16Bits(std::initializer_list<const StridedOperand *> operands) {
  return alignedBits(operands, 16);
}

int64_t tile::runtime::alignedBits(std::initializer_list<const StridedOperand *> operands,
                                   int64_t bytes) {
  int64_t bits = 0, bit = 0;
  for (const StridedOperand *operand : operands) {
    bool aligned = reinterpret_cast<uintptr_t>(operand->data) % bytes == 0;
    // An empty operand (K = 0) has nothing to copy, and no tensor map describes it.
    for (int64_t d = 0; d < operand->dims; ++d)
      aligned = aligned && operand->sizes[d] > 0;
    for (int64_t d = 0; d < 2; ++d) {
      if (operand->strides[d] == 1 || operand->sizes[d] == 1)
        continue;
      aligned = aligned && (operand->strides[d] * operand->elementBytes) % bytes == 0;
      // Rows that overlap (a broadcast's stride 0) no bulk tensor copy can read.
      int64_t other = 1 - d;
      if (operand->dims == 2 && (operand->strides[other] == 1 || operand->sizes[other] == 1))
        aligned = aligned && operand->strides[d] >= operand->sizes[other];
    }
    if (aligned)
      bits |= int64_t(1) << bit;
    ++bit;
  }
  return bits;
}

int64_t tile::runtime::matmulIndexBits(int64_t m, int64_t n, int64_t k, const StridedOperand &a,
                                       const StridedOperand &b, const StridedOperand &c,
                                       const StridedOperand *bias,
                                       const StridedOperand *activation) {
  constexpr int64_t int32Max = std::numeric_limits<int32_t>::max();
  int64_t largest =
      std::max({m, n, k, a.maxOffset(), b.maxOffset(), c.maxOffset(), bias ? bias->maxOffset() : 0,
                activation ? activation->maxOffset() : 0});
  return largest < int32Max ? 32 : 64;
}

int64_t tile::runtime::matmulPrograms(const std::map<std::string, int64_t> &config, int64_t m, int64_t n) {
  int64_t blockM = config.at("BLOCK_M"), blockN = config.at("BLOCK_N");
  // Clusters of num_ctas programs take adjacent block rows: the rows round up to whole
  // clusters (the programs past M store nothing).
  auto ctas = config.find("num_ctas");
  int64_t cluster = ctas != config.end() && ctas->second > 1 ? ctas->second : 1;
  int64_t rows = ((m + blockM - 1) / blockM + cluster - 1) / cluster * cluster;
  return rows * ((n + blockN - 1) / blockN);
}

std::string tile::runtime::matmulTuningBucket(const std::string &op, const std::vector<std::string> &dtypes,
                                              int64_t m, int64_t n, int64_t k) {
  auto nextPowerOfTwo = [](int64_t value) {
    int64_t power = 1;
    while (power < value)
      power <<= 1;
    return power;
  };
  std::string text = op + "[";
  for (size_t i = 0; i < dtypes.size(); ++i)
    text += (i ? "," : "") + dtypes[i];
  return text + "] " + std::to_string(nextPowerOfTwo(m)) + "x" + std::to_string(nextPowerOfTwo(n)) + "x" +
         std::to_string(nextPowerOfTwo(k));
}

void MatmulArguments::pack(const StridedOperand &aOperand, const StridedOperand &bOperand,
                           void *cData, const int64_t cStrides[2],
                           const StridedOperand *biasOperand, std::optional<float> negativeSlope,
                           int64_t indexBits, const StridedOperand *activationOperand) {
  a = aOperand.data;
  b = bOperand.data;
  c = cData;
  int64_t values[12] = {aOperand.sizes[0],
                        bOperand.sizes[1],
                        aOperand.sizes[1],
                        aOperand.strides[0],
                        aOperand.strides[1],
                        bOperand.strides[0],
                        bOperand.strides[1],
                        cStrides[0],
                        cStrides[1],
                        biasOperand ? biasOperand->strides[0] : 0,
                        activationOperand ? activationOperand->strides[0] : 0,
                        activationOperand ? activationOperand->strides[1] : 0};
  for (int i = 0; i < 12; ++i) {
    wide[i] = values[i];
    narrow[i] = static_cast<int32_t>(values[i]);
  }
  slope = negativeSlope.value_or(0.0f);
  auto index = [&](int i) -> void * { return indexBits == 32 ? static_cast<void *>(&narrow[i]) : &wide[i]; };
  args[kA] = &a;
  args[kB] = &b;
  int arg = 2;
  args[arg++] = &c;
  for (int i = 0; i < 9; ++i)
    args[arg++] = index(i);
  if (negativeSlope)
    args[arg++] = &slope;
  if (biasOperand) {
    bias = biasOperand->data;
    args[arg++] = &bias;
    args[arg++] = index(9);
  }
  if (activationOperand) {
    activation = activationOperand->data;
    args[arg++] = &activation;
    args[arg++] = index(10);
    args[arg++] = index(11);
  }
  count = packed = arg;
  operands[0] = aOperand;
  operands[1] = bOperand;
  operands[2] = StridedOperand{cData, 2, {aOperand.sizes[0], bOperand.sizes[1]}, {cStrides[0], cStrides[1]}, 0};
}

void MatmulArguments::useBPanels(const void *panels, const PanelLayout &layout) {
  b = panels;
  // The strides of b are values 5 and 6 (after M, N, K and a's two).
  for (auto [i, value] : {std::pair{5, layout.width * layout.group}, {6, layout.panelStride()}}) {
    wide[i] = value;
    narrow[i] = static_cast<int32_t>(value);
  }
  operands[1].data = panels;
  operands[1].strides[0] = layout.width * layout.group;
  operands[1].strides[1] = layout.panelStride();
}

void MatmulArguments::setStreamKWorkspace(void *workspaceData, void *flagData) {
  workspace = workspaceData;
  flags = flagData;
  count = packed;
  if (!workspace)
    return;
  args[count++] = &workspace;
  args[count++] = &flags;
}

void **MatmulArguments::withTensorMaps(const std::vector<TensorMapParameter> &parameters,
                                       TensorMapCache &cache) {
  if (parameters.size() > 3)
    throw std::runtime_error("a matmul kernel takes at most 3 tensor maps, this one " +
                             std::to_string(parameters.size()));
  static const char *const names[] = {"a", "b", "c"};
  for (size_t i = 0; i < parameters.size(); ++i) {
    const TensorMapParameter &parameter = parameters[i];
    if (parameter.operand < 0 || parameter.operand > 2)
      throw std::runtime_error("a tensor map for operand " + std::to_string(parameter.operand) +
                               " of a matmul (0: a, 1: b, 2: c)");
    uint32_t box[2] = {uint32_t(parameter.boxInner), uint32_t(parameter.boxOuter)};
    StridedOperand operand = operands[parameter.operand];
    // c is packed as a pointer and strides: its width is the one its map names.
    if (parameter.operand == 2)
      operand.elementBytes = tensorMapElementBytes(TensorMapElement(parameter.dataType));
    TensorMapPlan plan = planTensorMap(operand, int(parameter.contiguousDim),
                                       TensorMapElement(parameter.dataType), box,
                                       int(parameter.swizzleBytes));
    if (!plan.refusal.empty())
      throw std::runtime_error(std::string("no tensor map describes operand ") + names[parameter.operand] + ": " +
                               plan.refusal);
    maps[i] = cache.get(plan.shape);
    args[count + i] = maps[i].bytes;
  }
  return args;
}
