// layers/quantizer_layer.cc — Quantizer: converts a blob from bottom_data_type to
// top_data_type (any pair) with the conversion kernels, using its bottom quantizer's parameters
// for a quantized input and its top quantizer's for a quantized output; fp32→fp32 passes the
// gradient straight through in training (also when its quantizers run in PSEUDO mode).
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

class QuantizerLayer : public Layer {
 public:
  QuantizerLayer(const caffe::LayerParameter& p, Device& d) : Layer(p, d) {
    from_ = DataTypeFromProto(p.bottom_data_type(), Describe() + " bottom_data_type");
    to_ = DataTypeFromProto(p.top_data_type(), Describe() + " top_data_type");
  }
  const char* type() const override { return "Quantizer"; }
  bool SupportsType(DataType) const override { return true; }
  DataType bottom_type(int) const override { return from_; }
  DataType top_type(int) const override { return to_; }
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    top[0]->ReshapeLike(*bottom[0]);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override {
    const int n = bottom[0]->count();
    if (n == 0) return;
    if (from_ == to_) {
      CopyOrRequant(*bottom[0], BottomAffine(0), *top[0], TopAffine(0));
      return;
    }
    elementwise().Convert(from_, to_, n, *bottom[0]->device_data(), *top[0]->mutable_device_data(),
                          BottomAffine(0), TopAffine(0));
  }

 public:
  /// Training runs in fp32: only the fp32→fp32 form has a backward pass.
  bool HasBackward() const override {
    return from_ == DataType::kFloat32 && to_ == DataType::kFloat32;
  }

 protected:
  // Straight through: dx = dy (a PSEUDO quantizer's rounding has no gradient of its own).
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                    const std::vector<Blob*>& bottom) override {
    if (!down[0] || top[0] == bottom[0] || bottom[0]->count() == 0) return;
    device().CopyOnDevice(top[0]->device_diff(), 0, bottom[0]->mutable_device_diff(), 0,
                          bottom[0]->bytes());
  }

 private:
  DataType from_, to_;
};

}  // namespace

void RegisterQuantizerLayer() {
  LayerTyping converts;  // reads bottom_data_type, writes top_data_type
  converts.reads_bottom_type = converts.writes_top_type = true;
  RegisterLayerType<QuantizerLayer>("Quantizer", converts);
}

}  // namespace mpcaffe
