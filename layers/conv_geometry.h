// layers/conv_geometry.h — what Convolution, Deconvolution and Im2col (convolution_layer.cc) read
// from convolution_param: the channel axis, the 2-d window (kernel, stride, pad, dilation with
// their _h/_w overrides), BVLC's N-d window for any other number of spatial axes, and the
// geometry both convolutions share, each checked with an error naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "layers/blob.h"
#include "libdnn/conv.h"
#include "libdnn/conv_nd.h"
#include "proto/caffe.pb.h"

namespace mpcaffe::conv_layers {

/// A repeated spatial field (kernel_size, stride, pad, dilation) or its _h/_w override.
inline int Spatial(const google::protobuf::RepeatedField<uint32_t>& values, bool has_hw,
                   uint32_t hw, int index, int fallback) {
  if (has_hw) return static_cast<int>(hw);
  if (values.empty()) return fallback;
  return static_cast<int>(values.size() == 1 ? values.Get(0) : values.Get(index));
}

/// convolution_param.axis (BVLC's channel axis; negative counts from the end) of `bottom`: the
/// axes before it are batch axes, the axes after it spatial; `two_d` asks for exactly two
/// spatial axes (the layers with a 2-d window only), else at least one.
template <typename FailFn>
int ChannelAxis(const caffe::ConvolutionParameter& p, const Blob& bottom, FailFn fail,
                bool two_d = true) {
  const int axes = bottom.num_axes();
  const int axis = p.axis() < 0 ? p.axis() + axes : p.axis();
  if (axis < 0 || axis >= axes)
    fail("convolution_param.axis " + std::to_string(p.axis()) + " is out of range for bottom " +
         bottom.shape_string());
  if (two_d ? axes - axis - 1 != 2 : axes - axis - 1 < 1)
    fail("convolution_param.axis " + std::to_string(p.axis()) + ": bottom " +
         bottom.shape_string() +
         (two_d ? " must have 2 spatial axes after the channel axis (2-d windows only), has "
                : " must have a spatial axis after the channel axis, has ") +
         std::to_string(axes - axis - 1));
  return axis;
}

/// BVLC's N-d window (any number of spatial axes but two): kernel_size, stride, pad and
/// dilation each hold one value for every axis or one per axis; the _h/_w fields are 2-d only.
struct NdWindow {
  std::vector<int> kernel, stride, pad, dilation;

  template <typename FailFn>
  static NdWindow Of(const caffe::ConvolutionParameter& p, int axes, FailFn fail) {
    if (p.has_kernel_h() || p.has_kernel_w() || p.has_stride_h() || p.has_stride_w() ||
        p.has_pad_h() || p.has_pad_w())
      fail(
          "convolution_param: kernel_h/_w, stride_h/_w and pad_h/_w are for 2 spatial axes; this "
          "bottom has " +
          std::to_string(axes) + " (give kernel_size, stride, pad per axis)");
    NdWindow w;
    const std::pair<const google::protobuf::RepeatedField<uint32_t>*, std::vector<int>*> fields[] =
        {{&p.kernel_size(), &w.kernel},
         {&p.stride(), &w.stride},
         {&p.pad(), &w.pad},
         {&p.dilation(), &w.dilation}};
    const char* names[] = {"kernel_size", "stride", "pad", "dilation"};
    const int fallback[] = {0, 1, 0, 1};
    for (int f = 0; f < 4; ++f) {
      const auto& v = *fields[f].first;
      if (v.size() > 1 && v.size() != axes)
        fail(std::string("convolution_param.") + names[f] + " has " + std::to_string(v.size()) +
             " values for " + std::to_string(axes) + " spatial axes (give 1 or " +
             std::to_string(axes) + ")");
      for (int a = 0; a < axes; ++a)
        fields[f].second->push_back(v.empty() ? fallback[f]
                                              : static_cast<int>(v.Get(v.size() == 1 ? 0 : a)));
    }
    for (int a = 0; a < axes; ++a)
      if (w.kernel[a] <= 0 || w.stride[a] <= 0 || w.dilation[a] <= 0 || w.pad[a] < 0)
        fail("convolution_param: axis " + std::to_string(a) +
             " needs a positive kernel_size, stride and dilation and a pad not negative");
    return w;
  }
  int64_t KernelSize() const {
    int64_t n = 1;
    for (int k : kernel) n *= k;
    return n;
  }
};

/// The 2-d window of a ConvolutionParameter (Convolution, Deconvolution, Im2col): kernel, stride,
/// pad and dilation with their _h/_w overrides, checked; `fail` throws naming the layer.
struct Window {
  int kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;

  template <typename FailFn>
  static Window Of(const caffe::ConvolutionParameter& p, const Blob& bottom, FailFn fail) {
    ChannelAxis(p, bottom, fail);
    for (auto* f : {&p.kernel_size(), &p.stride(), &p.pad(), &p.dilation()})
      if (f->size() > 2) fail("convolution_param: only 2-d windows are supported");
    Window w;
    w.kh = Spatial(p.kernel_size(), p.has_kernel_h(), p.kernel_h(), 0, 0);
    w.kw = Spatial(p.kernel_size(), p.has_kernel_w(), p.kernel_w(), 1, 0);
    if (w.kh <= 0 || w.kw <= 0) fail("convolution_param.kernel_size must be given and positive");
    w.sh = Spatial(p.stride(), p.has_stride_h(), p.stride_h(), 0, 1);
    w.sw = Spatial(p.stride(), p.has_stride_w(), p.stride_w(), 1, 1);
    w.ph = Spatial(p.pad(), p.has_pad_h(), p.pad_h(), 0, 0);
    w.pw = Spatial(p.pad(), p.has_pad_w(), p.pad_w(), 1, 0);
    w.dh = Spatial(p.dilation(), false, 0, 0, 1);
    w.dw = Spatial(p.dilation(), false, 0, 1, 1);
    if (w.sh <= 0 || w.sw <= 0 || w.dh <= 0 || w.dw <= 0 || w.ph < 0 || w.pw < 0)
      fail("convolution_param: stride " + std::to_string(w.sh) + "x" + std::to_string(w.sw) +
           " and dilation " + std::to_string(w.dh) + "x" + std::to_string(w.dw) +
           " must be positive, pad " + std::to_string(w.ph) + "x" + std::to_string(w.pw) +
           " not negative");
    return w;
  }
  /// The convolution output extent of an input extent (Caffe's; may be ≤ 0).
  int64_t OutH(int64_t h) const { return (h + 2 * ph - (int64_t{dh} * (kh - 1) + 1)) / sh + 1; }
  int64_t OutW(int64_t w) const { return (w + 2 * pw - (int64_t{dw} * (kw - 1) + 1)) / sw + 1; }
};

/// The geometry Convolution and Deconvolution read from convolution_param: the window, the
/// groups, the bottom's channels and num_output, checked (`fail` throws naming the layer).
struct ConvGeometry {
  int kh_ = 0, kw_ = 0, sh_ = 1, sw_ = 1, ph_ = 0, pw_ = 0, dh_ = 1, dw_ = 1;
  int groups_ = 1, channels_ = 0, out_ = 0;
  int axis_ = 1;     // the channel axis: the axes before it are batch axes
  int spatial_ = 2;  // the spatial axes after it: 2 (the window above), else nd_
  NdWindow nd_;

  template <typename FailFn>
  void SetGeometry(const caffe::ConvolutionParameter& p, const Blob& bottom, FailFn fail) {
    axis_ = ChannelAxis(p, bottom, fail, false);
    spatial_ = bottom.num_axes() - axis_ - 1;
    if (spatial_ == 2) {
      const Window win = Window::Of(p, bottom, fail);
      kh_ = win.kh, kw_ = win.kw, sh_ = win.sh, sw_ = win.sw;
      ph_ = win.ph, pw_ = win.pw, dh_ = win.dh, dw_ = win.dw;
    } else {
      nd_ = NdWindow::Of(p, spatial_, fail);
    }
    groups_ = static_cast<int>(p.group());
    channels_ = bottom.shape(axis_);
    out_ = static_cast<int>(p.num_output());
    if (out_ <= 0) fail("convolution_param.num_output must be positive");
    if (groups_ <= 0 || channels_ % groups_ || out_ % groups_)
      fail("convolution_param.group " + std::to_string(groups_) + " must divide channels " +
           std::to_string(channels_) + " and num_output " + std::to_string(out_));
  }
  /// Checks that `b` has the set-up axes and channels; returns its batch (the axes before the
  /// channel axis, flattened).
  template <typename FailFn>
  int Batch(const Blob& b, FailFn fail) const {
    if (b.num_axes() != axis_ + 1 + spatial_ || b.shape(axis_) != channels_)
      fail("bottom " + b.shape_string() + " must have " + std::to_string(axis_ + 1 + spatial_) +
           " axes with " + std::to_string(channels_) + " channels at axis " +
           std::to_string(axis_));
    if (b.count(0, axis_) > INT32_MAX) fail("bottom " + b.shape_string() + ": batch beyond 2^31");
    return static_cast<int>(b.count(0, axis_));
  }
  /// The top shape: the bottom's batch axes, then channels and the two extents.
  std::vector<int> TopShape(const Blob& b, int channels, int h, int w) const {
    std::vector<int> shape(b.shape().begin(), b.shape().begin() + axis_);
    shape.insert(shape.end(), {channels, h, w});
    return shape;
  }
  /// The top shape of an N-d convolution: the bottom's batch axes, then channels and extents.
  std::vector<int> TopShape(const Blob& b, int channels, const std::vector<int>& extents) const {
    std::vector<int> shape(b.shape().begin(), b.shape().begin() + axis_);
    shape.push_back(channels);
    shape.insert(shape.end(), extents.begin(), extents.end());
    return shape;
  }
  /// The N-d convolution of `batch` images of `channels` channels with extents `in` to
  /// `out_channels` (the window and the groups are the layer's).
  libdnn::ConvNdDesc NdDesc(int batch, int channels, int out_channels, std::vector<int> in) const {
    libdnn::ConvNdDesc d;
    d.batch = batch, d.channels = channels, d.out_channels = out_channels, d.groups = groups_;
    d.in = std::move(in);
    d.kernel = nd_.kernel, d.stride = nd_.stride, d.pad = nd_.pad, d.dilation = nd_.dilation;
    return d;
  }
  /// The window and the groups of a libdnn convolution (extents and channels are the caller's).
  void SetWindowOf(libdnn::ConvDesc* d) const {
    d->kernel_h = kh_, d->kernel_w = kw_;
    d->stride_h = sh_, d->stride_w = sw_;
    d->pad_h = ph_, d->pad_w = pw_;
    d->dilation_h = dh_, d->dilation_w = dw_;
    d->groups = groups_;
  }
};

}  // namespace mpcaffe::conv_layers
