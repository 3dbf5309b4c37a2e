// libdnn/lrn.h — local response normalization across channels (Caffe's ACROSS_CHANNELS LRN,
// NCHW) forward in fp32 and fp16, backward in fp32, with host references.
//
// Contract (stable; layers/ builds on it):
//   * Layout packed NCHW, input and output [batch][channels][height][width] of `type`
//     (fp16: half storage, fp32 arithmetic, one rounding on store; int8q / int16q: the codes
//     dequantized and the output quantized as the convert kernels do, LrnDesc::quant, so the
//     same codes as converting to fp32, an fp32 LRN and converting back).
//   * scale[n,c,h,w] = k + (alpha/local_size) · Σ_{c' = c − (local_size−1)/2 … c + local_size/2,
//     0 ≤ c' < channels} x[n,c',h,w]²;  y = x · scale^(−beta). local_size is odd (Caffe).
//   * Forward may store `scale` (fp32, input-shaped) for Backward.
//   * Backward (fp32), as Caffe: bottom_diff = top_diff · scale^(−beta)
//       − (2·alpha·beta/local_size) · x · Σ_{c' whose window holds c} top_diff[c']·y[c']/scale[c'].
//     bottom_diff is overwritten.
//   * fp32 within 1e-5 relative of LrnForwardReference; fp16 within half rounding; quantized
//     within one code (the reference sums in double).
#pragma once

#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/defaults_table.h"
#include "libdnn/gemm.h"  // BufferRef
#include "libdnn/row_groups.h"

namespace mpcaffe::libdnn {

/// A quantized LRN's input and output quantization (one scale and zero point each).
struct LrnQuant {
  float x_scale = 1.0f;
  int x_zero = 0;
  float y_scale = 1.0f;
  int y_zero = 0;
};

/// What an LRN computes.
struct LrnDesc {
  DataType type = DataType::kFloat32;  // kFloat32, kFloat16, kInt8Q or kInt16Q
  int batch = 1, channels = 1, height = 1, width = 1;
  int local_size = 5;
  float alpha = 1.0f;
  float beta = 0.75f;
  float k = 1.0f;
  LrnQuant quant;  // quantized types: the codes' scales and zero points (kernel arguments)

  size_t count() const;
  std::string ToString() const;  // "fp32 n1 c96 h55 w55 size5 alpha0.0001 beta0.75 k1"
  /// Throws mpcaffe::Error (quantized type, even or non-positive local_size, sizes, ...).
  void Validate() const;
};

/// An LRN prepared for one device and description.
class Lrn {
 public:
  Lrn(Device& device, const LrnDesc& desc);

  const LrnDesc& desc() const { return desc_; }

  /// output = LRN(input); `scale` (fp32, may be empty; float types) keeps the scale for
  /// Backward.
  Event Forward(const BufferRef& input, const BufferRef& output, const BufferRef& scale = {},
                Queue* queue = nullptr);
  /// fp32 only: bottom_diff from input, output, top_diff and the scale of Forward.
  Event Backward(const BufferRef& input, const BufferRef& output, const BufferRef& top_diff,
                 const BufferRef& scale, const BufferRef& bottom_diff, Queue* queue = nullptr);

  /// The forward kernels for windows of `local_size` channels (unrolled into the text): the
  /// scalar one and, where the dialect has vectors, the one of `lanes`-lane vectors (8 or 16;
  /// name suffix _v8 / _v16); with `beta` 0.75 (Caffe's default, every BVLC net's) s^−β as
  /// square roots.
  static std::string ForwardSource(const KernelTarget& target, DataType type, int local_size = 5,
                                   float beta = 0.75f, int lanes = 8);
  static std::string BackwardSource(const KernelTarget& target);
  static std::string ForwardKernelName(DataType type);
  static std::string BackwardKernelName();

 private:
  Device* device_;
  LrnDesc desc_;
  int lanes_ = 0;         // the vector kernel's lanes (0: the scalar kernel runs)
  RowGroups launch_;      // the forward launch (the family's defaults table)
  Kernel forward_, backward_;
};

/// LRN's forward kernels as families, in the order an Lrn tries them (the first that applies
/// runs): the 16-lane vector kernel where 16 floats fill one register (PoCL at AVX-512) and rows
/// have at least 16 pixels, the 8-lane one where the dialect has vectors and rows have at least
/// 8, the scalar kernel everywhere; each with its launch per device class.
struct LrnForwardFamily {
  const char* name;  ///< "lrn_vector16", "lrn_vector", "lrn" (the registry's choice names)
  int lanes;         ///< the vector kernel's lanes (0: the scalar kernel)
  bool (*applies)(const LrnDesc& desc, const TargetProfile& profile);
  const DefaultsTable<RowGroups, LrnDesc>& (*launch)();
};
const std::vector<LrnForwardFamily>& LrnForwardFamilies();
const LrnForwardFamily& LrnForwardFamilyFor(const LrnDesc& desc, const TargetProfile& profile);

/// Host references (`scale` may be null in the forward).
void LrnForwardReference(const LrnDesc& desc, const void* input, void* output, float* scale);
void LrnBackwardReference(const LrnDesc& desc, const float* input, const float* output,
                          const float* top_diff, const float* scale, float* bottom_diff);

}  // namespace mpcaffe::libdnn
