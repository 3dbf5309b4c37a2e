// layers/lstm_unit_layer.cc — BVLC's LSTMUnit: one LSTM step from the previous cell state, the
// gate inputs and the sequence-continuation flags (the cell of the LSTM layer's unrolled net,
// net/recurrent_layer.cc). Forward in fp32 and fp16 (computed in float), backward in fp32. The
// quantized types are refused (SupportsType): a typed net runs the layer in fp32 between the
// Quantizer layers it inserts, and a prototxt asking it to compute in int8 / int16 fails with
// "layer '<name>' (LSTMUnit): does not compute in …".
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

/// Bottoms: c_prev (1 × N × H), x (1 × N × 4H: the gate inputs i, f, o, g), cont (1 × N).
/// Tops: c and h (1 × N × H). The cont flags get no gradient (AllowForceBackward), as in BVLC.
class LstmUnitLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "LSTMUnit"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 3; }
  int ExactNumTopBlobs() const override { return 2; }
  bool HasBackward() const override { return true; }
  bool AllowForceBackward(int bottom) const override { return bottom != 2; }

  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    static const char* const kNames[] = {"c_prev", "x", "cont"};
    const int streams = bottom[0]->num_axes() > 1 ? bottom[0]->shape(1) : -1;
    for (int i = 0; i < 3; ++i) {
      const Blob& b = *bottom[i];
      const int axes = i == 2 ? 2 : 3;
      if (b.num_axes() != axes || b.shape(0) != 1 || b.shape(1) != streams)
        Fail(std::string("bottom ") + std::to_string(i) + " (" + kNames[i] + ") has shape " +
             b.shape_string() + "; LSTMUnit takes c_prev 1 × N × H, x 1 × N × 4H and cont 1 × N" +
             (i ? " with N = " + std::to_string(streams) + " from c_prev" : std::string()));
    }
    hidden_ = bottom[0]->shape(2);
    if (bottom[1]->shape(2) != 4 * hidden_)
      Fail("bottom 1 (x) has shape " + bottom[1]->shape_string() + "; its last axis must be 4 × " +
           std::to_string(hidden_) + " (the gates i, f, o, g for c_prev's " +
           std::to_string(hidden_) + " cells)");
    top[0]->ReshapeLike(*bottom[0]);
    top[1]->ReshapeLike(*bottom[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    const DataType t = compute_type_;
    const size_t size = SizeOf(t);
    Kernel k = GetKernel(LstmUnitSource(target(), t), LayerKernelName("lstm_unit", t));
    k.Arg(int32_t{n})
        .Arg(int32_t{hidden_})
        .ArgBuffer(bottom[0]->device_data(), 0, size)
        .ArgBuffer(bottom[1]->device_data(), 0, size)
        .ArgBuffer(bottom[2]->device_data(), 0, size)
        .ArgBuffer(top[0]->mutable_device_data(), 0, size)
        .ArgBuffer(top[1]->mutable_device_data(), 0, size);
    k.Launch1D(n);
  }

  // Both gradients are computed together; one that is not asked for goes to a scratch buffer.
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (down[2] && bottom[2]->count())
      device().Zero(bottom[2]->mutable_device_diff(), 0, bottom[2]->bytes());
    const int n = bottom[0]->count();
    if ((!down[0] && !down[1]) || n == 0) return;
    const size_t scratch = down[0] && down[1] ? 0 : bottom[1]->bytes();
    if (scratch && (!scratch_ || scratch_->bytes() < scratch))
      scratch_ = device().Allocate(scratch);
    DeviceMemory* dc_prev = down[0] ? bottom[0]->mutable_device_diff() : scratch_.get();
    DeviceMemory* dx = down[1] ? bottom[1]->mutable_device_diff() : scratch_.get();
    Kernel k = GetKernel(LstmUnitSource(target(), DataType::kFloat32), "lstm_unit_backward_fp32");
    k.Arg(int32_t{n})
        .Arg(int32_t{hidden_})
        .ArgBuffer(bottom[0]->device_data(), 0, 4)
        .ArgBuffer(bottom[1]->device_data(), 0, 4)
        .ArgBuffer(bottom[2]->device_data(), 0, 4)
        .ArgBuffer(top[0]->device_data(), 0, 4)
        .ArgBuffer(top[0]->device_diff(), 0, 4)
        .ArgBuffer(top[1]->device_diff(), 0, 4)
        .ArgBuffer(dc_prev, 0, 4)
        .ArgBuffer(dx, 0, 4);
    k.Launch1D(n);
  }

 private:
  int hidden_ = 0;
  std::shared_ptr<DeviceMemory> scratch_;
};

}  // namespace

void RegisterLstmUnitLayer() { RegisterLayerType<LstmUnitLayer>("LSTMUnit"); }

}  // namespace mpcaffe
