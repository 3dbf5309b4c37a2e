// net/recurrent_layer.h — BVLC's recurrent layers: RecurrentLayer unrolls a recurrence over the T
// time steps of its input into a Net nested inside the layer, as BVLC does; RNN and LSTM say what
// one step computes (net/recurrent_layer.cc). They live in net/ beside the Net they nest.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"

namespace mpcaffe {

class Net;

/// BVLC's RecurrentLayer with recurrent_param's num_output (H), weight_filler, bias_filler,
/// expose_hidden (debug_info is accepted and ignored).
/// Bottoms: x (T × N × ...), cont (T × N: 0 where a sequence starts, else 1), an optional static
/// input x_static (N × ...), and with expose_hidden the initial state blobs (RNN: h_0; LSTM: h_0
/// and c_0; each 1 × N × H). Tops: the output sequence (T × N × H) and with expose_hidden the final
/// states (RNN: h_T; LSTM: h_T and c_T). Without expose_hidden the final states of one pass are the
/// initial states of the next (zero before the first; Reset() zeroes them), so a sequence goes on
/// over passes where cont is 1, as in BVLC.
/// The unrolled net holds the steps' InnerProduct, Slice, Concat, Scale, Eltwise, TanH / LSTMUnit
/// and Split layers, named "<layer>_<step layer>" and sharing weights by ParamSpec name; the
/// layer's parameter blobs are those shared weights in BVLC's order and shapes (LSTM: W_xc 4H × D,
/// b_c 4H, [W_xc_static 4H × D_static,] W_hc 4H × H, gates i, f, o, g; RNN: W_xh H × D, b_h H,
/// [W_xh_static,] W_hh H × H, W_ho H × H, b_o H), so a BVLC caffemodel loads. The unrolled net's
/// layers use those blobs themselves, so the net holding the layer trains, saves and shares them
/// as the layer's own; the nested net is not one of nested_nets() (its own parameter list would
/// count them twice).
/// Computes in fp32 and fp16 (the unrolled net in that type); the quantized types are refused, so
/// a typed net runs the layer in fp32 between the Quantizer layers it inserts. Backward in fp32 in
/// the TRAIN phase: gradients to x, x_static and the exposed initial states, and from the exposed
/// final states too (BVLC passes none through the exposed states); cont gets none.
class RecurrentLayer : public Layer {
 public:
  RecurrentLayer(const caffe::LayerParameter& param, Device& device);
  ~RecurrentLayer() override;
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int MinBottomBlobs() const override;
  int MaxBottomBlobs() const override { return MinBottomBlobs() + 1; }
  int ExactNumTopBlobs() const override;
  bool AllowForceBackward(int bottom) const override { return bottom != 1; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  /// Points the unrolled net's layers at the layer's parameter blobs again (another net may have
  /// shared its blobs with this one) and tells them their values changed.
  void ParamsChanged() override;
  /// Zeroes the states carried from one pass to the next (BVLC's Reset).
  void Reset();
  /// The unrolled net (built in LayerSetUp).
  Net& unrolled_net() const { return *net_; }

 protected:
  /// Adds the Input layer of the recurrent inputs and the layers of the T steps to `net`, which
  /// holds the Input layer of x, cont (and x_static) already.
  virtual void FillUnrolledNet(caffe::NetParameter* net) const = 0;
  /// Names of the initial-state blobs (h_0, c_0) and of the final-state blobs, in the same order.
  virtual std::vector<std::string> RecurrentInputNames() const = 0;
  virtual std::vector<std::string> RecurrentOutputNames() const = 0;
  /// Name of the output sequence blob.
  virtual std::string OutputName() const = 0;
  int num_output() const { return static_cast<int>(param_.recurrent_param().num_output()); }

  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

  int T_ = 0, N_ = 0;
  bool static_input_ = false;

 private:
  bool expose_hidden() const { return param_.recurrent_param().expose_hidden(); }
  /// Checks the bottoms' shapes against T (from x at set-up) and each other; sets N_.
  void CheckBottoms(const std::vector<Blob*>& bottom);
  /// Each parameter blob in place in the unrolled layers that use it.
  void ShareParams();

  std::unique_ptr<Net> net_;
  Blob *x_ = nullptr, *cont_ = nullptr, *x_static_ = nullptr, *output_ = nullptr;
  std::vector<Blob*> recur_in_, recur_out_;
  std::vector<Blob*> exposed_out_;  // what the final-state tops copy (a Split top where needed)
  std::vector<std::vector<std::pair<Layer*, int>>> uses_;  // per parameter: (unrolled layer, blob)
};

}  // namespace mpcaffe
