// libdnn/pool_stochastic.h — BVLC Caffe's stochastic pooling (Zeiler & Fergus) on the device:
// training samples one element per window, testing takes the probability-weighted average; fp32
// and fp16 forward, fp32 backward, with host references.
//
// Contract (stable; layers/ builds on it):
//   * Geometry: PoolDesc's (its `method` is ignored), pad 0 (BVLC samples inside the image only);
//     a window is [oy·stride_h, min(oy·stride_h + kernel_h, height)) × the same along the width
//     (global: the whole plane).
//   * Train: with u the output's uniform value in [0, 1) (drawn by the caller, one per output),
//     sum = Σx over the window and threshold = u·sum, both in fp32 in row-major order, the
//     output is the first element of the window whose running sum reaches the threshold (the
//     window's last element when rounding keeps every running sum below it), and `index` gets
//     its flat index h·width + w in the input plane. As caffe's StoPoolForwardTrain, with the
//     values taken to be non-negative (after a ReLU). Bit-exact with the reference.
//   * Test: Σx² / (FLT_MIN + Σx) in fp32 (0 for an all-zero window), as StoPoolForwardTest;
//     within 1e-6 relative of the reference (fp16: one rounding of that value).
//   * Backward (fp32): bottom_diff overwritten; each input element gathers the top_diff of every
//     window whose `index` names it (as StoPoolBackward, no atomics).
#pragma once

#include <cstdint>
#include <string>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/gemm.h"  // BufferRef
#include "libdnn/pool.h"  // PoolDesc

namespace mpcaffe::libdnn {

/// A stochastic pooling prepared for one device and description (type fp32 or fp16, pad 0).
/// Not thread-safe per object.
class StochasticPooling {
 public:
  StochasticPooling(Device& device, const PoolDesc& desc);

  const PoolDesc& desc() const { return desc_; }

  /// output = the sampled element of each window, index = its flat index in the input plane;
  /// `uniform`: fp32 values in [0, 1), one per output. Asynchronous.
  Event ForwardTrain(const BufferRef& input, const BufferRef& uniform, const BufferRef& output,
                     const BufferRef& index, Queue* queue = nullptr);
  /// output = Σx² / Σx over each window. Asynchronous.
  Event ForwardTest(const BufferRef& input, const BufferRef& output, Queue* queue = nullptr);
  /// fp32 descriptions only: bottom_diff from top_diff and the index of ForwardTrain.
  Event Backward(const BufferRef& top_diff, const BufferRef& index, const BufferRef& bottom_diff,
                 Queue* queue = nullptr);

  /// The program of `type`'s forward kernels, with the backward kernel when type is fp32.
  static std::string Source(const KernelTarget& target, DataType type);
  static std::string TrainKernelName(DataType type);
  static std::string TestKernelName(DataType type);
  static std::string BackwardKernelName();

 private:
  Device* device_;
  PoolDesc desc_;
  Kernel train_, test_, backward_;
};

/// Host references (`input`/`output` in desc.type's storage; `uniform`, `index` per output).
void StochasticPoolTrainReference(const PoolDesc& desc, const void* input, const float* uniform,
                                  void* output, int32_t* index);
void StochasticPoolTestReference(const PoolDesc& desc, const void* input, void* output);
void StochasticPoolBackwardReference(const PoolDesc& desc, const float* top_diff,
                                     const int32_t* index, float* bottom_diff);

}  // namespace mpcaffe::libdnn
