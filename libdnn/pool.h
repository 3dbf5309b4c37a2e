// libdnn/pool.h — 2-D max, average and global pooling (NCHW, Caffe's geometry) for fp32, fp16,
// int16q and int8q forward and fp32 backward, with host references.
//
// Contract (stable; layers/ builds on it):
//   * Layouts packed NCHW: input [batch][channels][height][width], output
//     [batch][channels][out_h][out_w], mask (max, optional) int32 of the output's shape.
//   * Geometry as BVLC Caffe: out_h = ceil((height + 2·pad_h − kernel_h) / stride_h) + 1, minus
//     one when the last window would start at or beyond height + pad_h (pad > 0). global:
//     kernel = height × width, stride 1, pad 0 (output 1×1).
//   * Max: the largest value of the window clipped to the input (padding never wins); the mask
//     stores its flat index h·width + w in the input plane (the first one on ties).
//     Quantized: when input and output share scale and zero point the stored integers are
//     compared and copied; otherwise out = clamp(y_zero + Requantize(max − x_zero, s_x/s_y)).
//   * Average: Caffe's divisor `count` = window area clipped to [−pad, size + pad) (padding
//     counts as zeros). Float: Σx / count in fp32 (fp16: half storage, fp32 sum, one rounding).
//     Quantized: acc = Σ (x − x_zero) over the window clipped to the input, in int32 (int8q) /
//     int64 (int16q); out = clamp(y_zero + Requantize(acc, QuantizeMultiplier(s_x/(s_y·count))))
//     — one round-to-nearest (ties away from zero) of s_x·acc/(s_y·count), no truncating
//     divide. Requantize = quant::Requantize32 (int8q) / Requantize64 (int16q).
//   * Quantized results are bit-exact with PoolForwardReference; fp32 within 1e-6 relative.
//   * Backward (fp32): bottom_diff is overwritten. Max routes each top_diff to the input at
//     mask; average spreads top_diff/count over the window (clipped to the input).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/defaults_table.h"
#include "libdnn/gemm.h"  // BufferRef
#include "libdnn/row_groups.h"

namespace mpcaffe::libdnn {

enum class PoolMethod { kMax, kAverage };

/// What a pooling computes; fixed when its kernels are generated.
struct PoolDesc {
  DataType type = DataType::kFloat32;
  PoolMethod method = PoolMethod::kMax;
  int batch = 1, channels = 1, height = 1, width = 1;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  bool global = false;  // kernel = whole plane (the kernel/stride/pad fields are ignored)

  int out_h() const;
  int out_w() const;
  /// The effective window (global pooling resolved).
  int window_h() const { return global ? height : kernel_h; }
  int window_w() const { return global ? width : kernel_w; }
  size_t input_count() const;
  size_t output_count() const;
  std::string ToString() const;  // "int8q max n1 c96 h55 w55 k3x3 s2x2 p0x0"
  /// Throws mpcaffe::Error naming the field (non-positive sizes, pad ≥ kernel, ...).
  void Validate() const;
};

/// Quantization of input and output (quantized types only).
struct PoolQuant {
  float x_scale = 1.0f;
  int32_t x_zero = 0;
  float y_scale = 1.0f;
  int32_t y_zero = 0;
};

/// A pooling prepared for one device and description. Not thread-safe per object.
class Pooling {
 public:
  Pooling(Device& device, const PoolDesc& desc, const PoolQuant& quant = {});

  const PoolDesc& desc() const { return desc_; }

  /// output = pool(input). `mask` (max pooling only, may be empty) receives int32 argmax
  /// indices for Backward. Asynchronous.
  Event Forward(const BufferRef& input, const BufferRef& output, const BufferRef& mask = {},
                Queue* queue = nullptr);
  /// fp32 only: bottom_diff from top_diff (max pooling needs the mask of Forward).
  Event Backward(const BufferRef& top_diff, const BufferRef& mask, const BufferRef& bottom_diff,
                 Queue* queue = nullptr);

  static std::string ForwardSource(const KernelTarget& target, DataType type, PoolMethod method);
  static std::string BackwardSource(const KernelTarget& target, PoolMethod method);
  static std::string ForwardKernelName(DataType type, PoolMethod method);
  static std::string BackwardKernelName(PoolMethod method);

 private:
  Device* device_;
  PoolDesc desc_;
  PoolQuant quant_;
  Kernel forward_, backward_;
  Kernel forward_vec_;  // max pooling without a mask (OpenCL)
  RowGroups vec_launch_;  // forward_vec_'s launch (PoolVectorMaxDefaults, PoolPlaneMaxDefaults)
  bool plane_ = false;    // forward_vec_ is the plane form (pool_internal::DeclarePlaneMax)
  bool plane_ave_ = false;  // forward_vec_ is the whole-plane average (DeclarePlaneAve)
  bool walk_ = false;      // forward_vec_ is the column walk (DeclareWalkMax)
  vptr<int32_t> avg_requant_;  // quantized average: (multiplier, shift) per count 1..area
  int32_t max_mult_ = 0, max_shift_ = 0, max_same_ = 1;
};

/// The vector max kernel's launch per device class (the first row serving the device).
const DefaultsTable<RowGroups, PoolDesc>& PoolVectorMaxDefaults();
/// The plane form's launch (quantized 3×3 stride-1 pools that keep the plane's size).
const DefaultsTable<RowGroups, PoolDesc>& PoolPlaneMaxDefaults();
/// The column walk's launch (int8q and fp32 2×2 and 3×3 max pools at stride 1 and 2).
const DefaultsTable<RowGroups, PoolDesc>& PoolWalkMaxDefaults();

/// Pooling's forward kernels as families, in the order a Pooling tries them: the first that
/// applies runs (a mask asked for at Forward takes the scalar kernel, which every device has).
struct PoolForwardFamily {
  const char* name;  ///< "pool_walk_max", "pool_plane_max", "pool_vector_max",
                     ///< "pool_plane_ave", "pool" (the registry's names)
  bool (*applies)(const PoolDesc& desc, const TargetProfile& profile);
  /// The family's launch defaults; null: the 1-D launch of the device's choosing.
  const DefaultsTable<RowGroups, PoolDesc>& (*launch)();
};
const std::vector<PoolForwardFamily>& PoolForwardFamilies();
const PoolForwardFamily& PoolForwardFamilyFor(const PoolDesc& desc, const TargetProfile& profile);

/// Host references. `mask` may be null.
void PoolForwardReference(const PoolDesc& desc, const PoolQuant& quant, const void* input,
                          void* output, int32_t* mask);
void PoolBackwardReference(const PoolDesc& desc, const float* top_diff, const int32_t* mask,
                           float* bottom_diff);

}  // namespace mpcaffe::libdnn
