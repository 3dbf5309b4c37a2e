// libdnn/conv_nd.h — the fp32 convolution over any number of spatial axes but two (BVLC's
// `num_spatial_axes` ≠ 2: 1-d signals, 3-d volumes, …), as BVLC computes it: per image and
// group, an N-d im2col then one GEMM (forward), a GEMM then an N-d col2im (backward data), an
// im2col then an accumulating GEMM (backward weights). The 2-d convolution (conv.h) keeps its
// implicit GEMM and every data type; this one is fp32 only: the layers refuse other types.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/gemm.h"

namespace mpcaffe::libdnn {

/// An N-d convolution: the input is [batch][channels][in[0]]…[in[D−1]], the weights
/// [out_channels][channels/groups][kernel[0]]…[kernel[D−1]], the output
/// [batch][out_channels][out(0)]…[out(D−1)]; every per-axis vector has D entries.
struct ConvNdDesc {
  int batch = 0, channels = 0, out_channels = 0, groups = 1;
  std::vector<int> in, kernel, stride, pad, dilation;

  int axes() const { return static_cast<int>(in.size()); }
  /// Caffe's output extent of axis a: (in + 2·pad − dilation·(kernel − 1) − 1) / stride + 1.
  int out(int a) const;
  /// Products over the axes: input, kernel window, output positions of one channel.
  int64_t in_size() const;
  int64_t kernel_size() const;
  int64_t out_size() const;
  size_t input_count() const { return size_t(batch) * channels * in_size(); }
  size_t output_count() const { return size_t(batch) * out_channels * out_size(); }
  size_t weight_count() const { return size_t(out_channels) * (channels / groups) * kernel_size(); }
  /// "b2 c3 o4 g1 in 5x6x7 k 3x3x3 s 1x1x1 p 0x0x0 d 1x1x1".
  std::string ToString() const;
  /// Throws mpcaffe::Error saying which field is wrong (axes, counts, extents beyond 2^31).
  void Check() const;
};

/// A prepared N-d convolution on one device (fp32). Buffers are the caller's, fp32, packed as
/// ConvNdDesc says; `queue` null is the device's default queue.
class ConvolutionNd {
 public:
  ConvolutionNd(Device& device, const ConvNdDesc& desc);
  ~ConvolutionNd();
  const ConvNdDesc& desc() const { return desc_; }

  /// y = W ∗ x (no bias: the layers add it).
  void Forward(const BufferRef& x, const BufferRef& weights, const BufferRef& y,
               Queue* queue = nullptr);
  /// dx = the transposed convolution of dy (overwritten).
  void BackwardData(const BufferRef& dy, const BufferRef& weights, const BufferRef& dx,
                    Queue* queue = nullptr);
  /// dW += dy ⋆ x (accumulated over the batch and into what dW held).
  void BackwardWeights(const BufferRef& dy, const BufferRef& x, const BufferRef& dweights,
                       Queue* queue = nullptr);

  /// The program of the N-d im2col ("conv_nd_im2col") and col2im ("conv_nd_col2im") kernels;
  /// the number of axes and the geometry are arguments, so one text serves every shape.
  static std::string Source(const KernelTarget& target);

 private:
  void Im2col(const BufferRef& x, Queue* queue);

  Device* device_;
  ConvNdDesc desc_;
  int cg_ = 0, ocg_ = 0, kc_ = 0, p_ = 0;  // per group: channels, outputs, column rows, positions
  std::shared_ptr<DeviceMemory> geometry_, col_;
  Kernel im2col_, col2im_;
  std::unique_ptr<Gemm> forward_, data_, weights_;
};

/// Plain C++ reference of the forward pass (bias per output channel, or none when null).
void ConvNdForwardReference(const ConvNdDesc& d, const float* x, const float* weights,
                            const float* bias, float* y);

}  // namespace mpcaffe::libdnn
