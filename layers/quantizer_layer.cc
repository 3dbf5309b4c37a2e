// layers/quantizer_layer.cc — Quantizer: converts a blob from bottom_data_type to
// top_data_type (any pair) with the conversion kernels (an fp32 input newest on the host: on the
// host, into the top's device memory), using its bottom quantizer's parameters for a quantized
// input and its top quantizer's for a quantized output; fp32→fp32 passes the
// gradient straight through in training (also when its quantizers run in PSEUDO mode).
#include "layers/filler_values.h"  // ParallelChunks
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
    if (from_ == DataType::kFloat32 && bottom[0]->host_newest() &&
        ConvertOnHost(*bottom[0], *top[0]))
      return;
    elementwise().Convert(from_, to_, n, *bottom[0]->device_data(), *top[0]->mutable_device_data(),
                          BottomAffine(0), TopAffine(0));
  }

  /// An fp32 bottom written on the host since the last pass (an input set from NumPy, a data
  /// layer's batch) is converted there, on every core, straight into a view of the top's device
  /// memory: one pass that writes the converted bytes once, where the device's conversion would
  /// first need the fp32 values copied over. The host conversion has the kernel's bits
  /// (quant::ConvertTensor). False (nothing done) for per-channel top parameters.
  bool ConvertOnHost(Blob& bottom, Blob& top) {
    quant::QuantParams yq;
    if (IsQuantized(to_)) {
      yq = TopParams(0);
      if (yq.per_channel()) return false;
    }
    const auto* x = static_cast<const float*>(bottom.host_data());
    std::unique_ptr<HostView> view = top.OverwriteData();
    auto* y = static_cast<uint8_t*>(view->data());
    const size_t es = SizeOf(to_);
    ParallelChunks(static_cast<size_t>(bottom.count()), [&](size_t b, size_t e) {
      quant::ConvertTensor(from_, {}, x + b, to_, yq, y + b * es, e - b);
    });
    return true;
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
