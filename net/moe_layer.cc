// net/moe_layer.cc — the MOE layer: nested gating and expert nets, top-K gating, grouped or
// full-batch expert execution with device gather / scatter / mixing kernels, load-balancing
// counts and loss, fp32 backward through experts and gating; its registry entry.
#include "net/moe_layer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>

#include "layers/host_math.h"
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "net/net.h"
#include "device/settings.h"

namespace mpcaffe {

// ---- Kernels -----------------------------------------------------------------------------------

std::string MoeKernelName(const std::string& op, DataType type) {
  const bool typed = op == "gather" || op == "scatter_add";
  return "moe_" + op + (typed ? std::string("_") + Name(type) : std::string());
}

std::string MoeSource(const KernelTarget& target, DataType type) {
  KernelWriter w(target, "moe");
  w.AddType("Dtype", type);
  w.Kernel(MoeKernelName("gather", type))
      .Value("int", "rows").Value("int", "dim").In("Dtype", "x").In("int", "idx").Out("Dtype", "y")
      .Body(R"(  $loop(i, rows * dim) {
    const int r = i / dim;
    const int d = i - r * dim;
    Dtype_STORE(y, i, Dtype_LOAD(x, idx[r] * dim + d));
  }
)");
  w.Kernel(MoeKernelName("scatter_add", type))
      .Value("int", "rows").Value("int", "dim").In("int", "src").In("int", "dst").In("float", "w")
      .In("Dtype", "x").Out("float", "acc").Value("float", "scale").Value("int", "zero")
      .Body(R"(  $loop(i, rows * dim) {
    const int r = i / dim;
    const int d = i - r * dim;
    const float v = ((float)Dtype_LOAD(x, src[r] * dim + d) - (float)zero) * scale;
    acc[dst[r] * dim + d] += w[r] * v;
  }
)");
  if (type != DataType::kFloat32) return w.Source();
  w.Kernel(MoeKernelName("row_dot", type))
      .Value("int", "rows").Value("int", "dim").In("int", "src").In("int", "dst").In("float", "x")
      .In("float", "dy").Out("float", "g")
      .Body(R"(  $loop(r, rows) {
    float s = 0.0f;
    const int xs = src[r] * dim;
    const int ys = dst[r] * dim;
    for (int d = 0; d < dim; ++d) s += x[xs + d] * dy[ys + d];
    g[r] = s;
  }
)");
  w.Kernel(MoeKernelName("rows_scaled", type))
      .Value("int", "rows").Value("int", "dim").In("int", "src").In("int", "dst").In("float", "w")
      .In("float", "dy").Out("float", "y")
      .Body(R"(  $loop(i, rows * dim) {
    const int r = i / dim;
    const int d = i - r * dim;
    y[src[r] * dim + d] = w[r] * dy[dst[r] * dim + d];
  }
)");
  w.Kernel(MoeKernelName("rows_add", type))
      .Value("int", "rows").Value("int", "dim").In("int", "src").In("int", "dst").In("float", "x")
      .Out("float", "y")
      .Body(R"(  $loop(i, rows * dim) {
    const int r = i / dim;
    const int d = i - r * dim;
    y[dst[r] * dim + d] += x[src[r] * dim + d];
  }
)");
  return w.Source();
}

// ---- Host references ---------------------------------------------------------------------------

namespace {

/// Indices of the k largest of row b (ties: lower index first).
std::vector<int> TopKRow(const float* p, int experts, int k) {
  std::vector<int> idx(experts);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [p](int a, int b) { return p[a] > p[b]; });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

}  // namespace

std::vector<float> SelectTopK(const std::vector<float>& probs, int batch, int experts, int k) {
  std::vector<float> g(static_cast<size_t>(batch) * experts, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const float* p = probs.data() + static_cast<size_t>(b) * experts;
    const std::vector<int> sel = TopKRow(p, experts, k);
    double sum = 0;
    for (int i : sel) sum += p[i];
    for (int i : sel)
      g[static_cast<size_t>(b) * experts + i] =
          sum > 0 ? static_cast<float>(p[i] / sum) : 1.0f / static_cast<float>(k);
  }
  return g;
}

double LoadBalancingLoss(const std::vector<int>& counts, int batch, int k) {
  const double n = static_cast<double>(counts.size());
  double l = 0;
  for (int c : counts) {
    const double d = k / n - static_cast<double>(c) / batch;
    l += d * d;
  }
  return l / n;
}

// ---- MOE layer ---------------------------------------------------------------------------------

struct MoeLayer::Nested {
  std::string label;               // "gating net", "expert 3" (messages)
  std::unique_ptr<Net> net;
  std::vector<int> bottoms;        // MOE bottom feeding net->input_blobs()[i]
  Blob* output = nullptr;
  Layer* out_layer = nullptr;      // last writer of `output`
  int out_top = 0;
  int batch = -1;                  // batch of the inputs' last reshape
};

/// The rows one expert handles in a Forward: output row src[r] of the expert goes to the
/// layer's row dst[r] with weight w[r]; mirrored in device buffers.
struct MoeLayer::Rows {
  int n = 0;
  std::vector<int32_t> src, dst;
  std::vector<float> w;
  std::shared_ptr<DeviceMemory> src_mem, dst_mem, w_mem, g_mem;
  size_t capacity = 0;

  void Upload(Device& device) {
    if (static_cast<size_t>(n) > capacity || !src_mem) {
      capacity = std::max<size_t>(n, 1);
      src_mem = device.Allocate(capacity * 4);
      dst_mem = device.Allocate(capacity * 4);
      w_mem = device.Allocate(capacity * 4);
      g_mem = device.Allocate(capacity * 4);
    }
    if (!n) return;
    device.CopyToDevice(src.data(), src_mem.get(), 0, n * 4);
    device.CopyToDevice(dst.data(), dst_mem.get(), 0, n * 4);
    device.CopyToDevice(w.data(), w_mem.get(), 0, n * 4);
  }
};

namespace {

bool FeedsGating(int mapping) {
  return mapping == caffe::MOEParameter::GATING || mapping == caffe::MOEParameter::GATING_AND_EXPERT;
}
bool FeedsExperts(int mapping) {
  return mapping == caffe::MOEParameter::EXPERT || mapping == caffe::MOEParameter::GATING_AND_EXPERT;
}

/// The mean of a filler's distribution (what a noise source gives when noise is off).
float FillerMean(const caffe::FillerParameter& f) {
  if (f.type() == "constant") return f.value();
  if (f.type() == "uniform") return 0.5f * (f.min() + f.max());
  if (f.type() == "gaussian") return f.mean();
  return 0.0f;  // xavier, msra: zero-mean
}

/// How many queues the experts of one MOE layer spread over: MPCAFFE_MOE_QUEUES when set (0 or 1:
/// every expert on the layer's own queue), else one per expert.
int ExpertQueueCount(int experts) {
  const std::string& env = GetSettings().moe_queues;
  if (env.empty()) return experts;
  char* end = nullptr;
  const long n = std::strtol(env.c_str(), &end, 10);
  if (*end || n < 0) throw Error("MPCAFFE_MOE_QUEUES=" + env + ": expected a number ≥ 0");
  return static_cast<int>(std::min<long>(n, experts));
}

}  // namespace

/// Expert e's queue while alive (nothing when the experts share the layer's queue). Work the
/// layer's queue enqueued before is finished first, so the expert sees its inputs.
class MoeLayer::ExpertScope {
 public:
  ExpertScope(MoeLayer& layer, int e) {
    if (layer.queues_.empty()) return;
    if (!layer.queues_busy_) {
      layer.device().Finish();
      layer.queues_busy_ = true;
    }
    scope_.emplace(layer.device(), layer.queues_[e % layer.queues_.size()].get());
  }

 private:
  std::optional<QueueScope> scope_;
};

void MoeLayer::JoinExperts() {
  if (!queues_busy_) return;
  for (auto& q : queues_) q->Finish();
  queues_busy_ = false;
}

MoeLayer::MoeLayer(const caffe::LayerParameter& param, Device& device) : Layer(param, device) {
  bottom_type_ = DataTypeFromProto(param.bottom_data_type(), Describe());
  top_type_ = DataTypeFromProto(param.top_data_type(), Describe());
}

MoeLayer::~MoeLayer() = default;

std::vector<Net*> MoeLayer::nested_nets() const {
  std::vector<Net*> all;
  if (gating_) all.push_back(gating_->net.get());
  for (const auto& e : experts_) all.push_back(e->net.get());
  return all;
}

std::string MoeLayer::nested_net_name(int k) const {
  return k == 0 ? std::string("gating") : "expert" + std::to_string(k - 1);
}

std::vector<caffe::NetParameter*> MoeLayer::SavedNestedNets(caffe::LayerParameter* saved) const {
  caffe::MOEParameter* moe = saved->mutable_moe_param();
  moe->clear_expert_net();
  moe->clear_expert_instances();
  std::vector<caffe::NetParameter*> nets{moe->mutable_gating_net()};
  for (size_t e = 0; e < experts_.size(); ++e) nets.push_back(moe->add_expert_net());
  return nets;
}

std::vector<const caffe::NetParameter*> MoeLayer::SavedNestedNets(
    const caffe::LayerParameter& saved) const {
  if (!saved.has_moe_param()) return {};
  const caffe::MOEParameter& moe = saved.moe_param();
  if (moe.expert_net_size() != num_experts())
    throw NetError("layer '" + saved.name() + "': the weights hold " +
                   std::to_string(moe.expert_net_size()) +
                   " expert nets, the net's MOE layer has " + std::to_string(num_experts()) +
                   " expert instances");
  std::vector<const caffe::NetParameter*> nets{moe.has_gating_net() ? &moe.gating_net() : nullptr};
  for (const caffe::NetParameter& e : moe.expert_net()) nets.push_back(&e);
  return nets;
}

void MoeLayer::LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const caffe::MOEParameter& mp = param_.moe_param();
  if (!mp.has_gating_net()) Fail("moe_param has no gating_net");
  if (mp.expert_net_size() == 0) Fail("moe_param has no expert_net");
  if (mp.map_bottom_size() && mp.map_bottom_size() != static_cast<int>(bottom.size()))
    Fail("map_bottom has " + std::to_string(mp.map_bottom_size()) + " entries for " +
         std::to_string(bottom.size()) + " bottoms (give one per bottom, or none)");
  if (mp.expert_instances_size() && mp.expert_instances_size() != mp.expert_net_size())
    Fail("expert_instances has " + std::to_string(mp.expert_instances_size()) + " entries for " +
         std::to_string(mp.expert_net_size()) + " expert_net (give one per expert_net, or none)");
  full_forward_ = mp.full_forward();
  std::vector<int> mapping(bottom.size(), caffe::MOEParameter::GATING_AND_EXPERT);
  for (int j = 0; j < mp.map_bottom_size(); ++j) mapping[j] = mp.map_bottom(j);
  auto fed = [&](bool gating) {  // the bottoms feeding the gating net or the experts
    std::vector<int> ids;
    for (size_t j = 0; j < bottom.size(); ++j)
      if (gating ? FeedsGating(mapping[j]) : FeedsExperts(mapping[j]))
        ids.push_back(static_cast<int>(j));
    return ids;
  };
  gating_ = BuildNested(mp.gating_net(), "gating net", fed(true), 0);
  for (int k = 0; k < mp.expert_net_size(); ++k) {
    const int64_t n = mp.expert_instances_size() ? mp.expert_instances(k) : 1;
    if (n < 1) Fail("expert_instances(" + std::to_string(k) + ") is " + std::to_string(n) + " (need >= 1)");
    for (int64_t i = 0; i < n; ++i)
      experts_.push_back(BuildNested(
          mp.expert_net(k),
          "expert " + std::to_string(experts_.size()) + " (expert_net " + std::to_string(k) + ")",
          fed(false), static_cast<int>(i)));
  }
  select_ = static_cast<int>(mp.has_select_experts() ? mp.select_experts() : 1);
  if (select_ < 1 || select_ > num_experts())
    Fail("select_experts is " + std::to_string(select_) + " with " + std::to_string(num_experts()) +
         " experts (need 1 … number of experts)");
  for (size_t e = 0; e < experts_.size(); ++e) rows_.push_back(std::make_unique<Rows>());
  const int queues = ExpertQueueCount(num_experts());
  if (queues > 1)
    for (int q = 0; q < queues; ++q) queues_.push_back(device().CreateQueue());
}

// Builds one nested net; its Input tops take the mapped bottoms (and their quantizer names, so
// ranges calibrated on the fp32 net apply to both sides).
std::unique_ptr<MoeLayer::Nested> MoeLayer::BuildNested(caffe::NetParameter np,
                                                        const std::string& label,
                                                        std::vector<int> bottoms, int instance) {
  const bool train = phase() == caffe::TRAIN;
  auto nested = std::make_unique<Nested>();
  nested->label = label;
  nested->bottoms = std::move(bottoms);
  size_t next = 0;
  for (auto& l : *np.mutable_layer()) {
    if (instance > 0) l.set_name(l.name() + "_i" + std::to_string(instance));
    if (l.type() == "Input") {
      for (int t = 0; t < l.top_size(); ++t) {
        while (l.top_quantizer_size() <= t) l.add_top_quantizer();
        if (next < nested->bottoms.size())
          l.mutable_top_quantizer(t)->set_name(BottomQuantizerName(nested->bottoms[next]));
        ++next;
      }
    }
    // Noise is off in TEST: random DummyData fillers give their mean.
    if (!train && l.type() == "DummyData")
      for (auto& f : *l.mutable_dummy_data_param()->mutable_data_filler()) {
        const float mean = FillerMean(f);
        f.Clear();
        f.set_type("constant");
        f.set_value(mean);
      }
  }
  if (next != nested->bottoms.size())
    Fail(label + " has " + std::to_string(next) + " Input tops but " +
         std::to_string(nested->bottoms.size()) + " bottoms are mapped to it (map_bottom)");
  if (train) np.set_force_backward(true);
  NetOptions o;
  o.phase = phase();
  o.nested = true;
  o.backward_from_outputs = train;
  try {
    nested->net = std::make_unique<Net>(np, device(), o);
  } catch (const Error& e) {
    Fail(label + ": " + e.what());
  }
  CheckNested(*nested);
  return nested;
}

// The nested net's inputs take the layer's bottom type; its one output is the layer's input
// (gating probabilities or expert output), found with the layer that writes it.
void MoeLayer::CheckNested(Nested& nested) {
  const std::string& label = nested.label;
  Net& net = *nested.net;
  const auto& inputs = net.input_blobs();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]->type() != bottom_type_)
      Fail(label + " input '" + inputs[i]->name() + "' is " + Name(inputs[i]->type()) +
           " but the layer's bottoms are " + Name(bottom_type_) +
           " (set the Input layer's top_data_type to the layer's bottom_data_type)");
  if (net.output_blobs().size() != 1) {
    std::string names;
    for (Blob* b : net.output_blobs()) names += " '" + b->name() + "'";
    Fail(label + " must have exactly one output blob (a blob no layer consumes); it has " +
         std::to_string(net.output_blobs().size()) + ":" + names);
  }
  nested.output = net.output_blobs()[0];
  for (size_t i = 0; i < net.layers().size(); ++i)
    for (size_t t = 0; t < net.top_vecs()[i].size(); ++t)
      if (net.top_vecs()[i][t] == nested.output) {
        nested.out_layer = net.layers()[i].get();
        nested.out_top = static_cast<int>(t);
      }
  if (!nested.out_layer) Fail(label + ": output '" + nested.output->name() + "' has no producer");
}

void MoeLayer::FeedInputs(Nested& n, const std::vector<Blob*>& bottom, const Rows* rows) {
  Net& net = *n.net;
  const int batch = rows ? rows->n : bottom[0]->shape(0);
  if (n.batch != batch) {
    for (size_t i = 0; i < n.bottoms.size(); ++i) {
      std::vector<int> shape = bottom[n.bottoms[i]]->shape();
      shape[0] = batch;
      net.input_blobs()[i]->Reshape(shape);
    }
    net.Reshape();
    n.batch = batch;
  }
  for (size_t i = 0; i < n.bottoms.size(); ++i) {
    Blob& src = *bottom[n.bottoms[i]];
    Blob& dst = *net.input_blobs()[i];
    if (!rows) {
      if (src.bytes()) device().CopyOnDevice(src.device_data(), 0, dst.mutable_device_data(), 0, src.bytes());
      continue;
    }
    if (!rows->n) continue;
    const int dim = src.count(1);
    Kernel k = TypedKernel("gather", src.type());
    k.Arg(int32_t{rows->n}).Arg(int32_t{dim}).ArgBuffer(src.device_data(), 0, SizeOf(src.type()))
        .ArgBuffer(rows->dst_mem.get(), 0, 4).ArgBuffer(dst.mutable_device_data(), 0, SizeOf(dst.type()));
    k.Launch1D(static_cast<size_t>(rows->n) * dim);
  }
}

Kernel MoeLayer::TypedKernel(const std::string& op, DataType type) {
  return GetKernel(MoeSource(target(), type), MoeKernelName(op, type));
}

Kernel MoeLayer::TrainKernel(const std::string& op) {
  return GetKernel(MoeSource(target(), DataType::kFloat32), MoeKernelName(op, DataType::kFloat32));
}

void MoeLayer::Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int batch = bottom[0]->num_axes() ? bottom[0]->shape(0) : 0;
  for (size_t j = 0; j < bottom.size(); ++j)
    if (bottom[j]->num_axes() == 0 || bottom[j]->shape(0) != batch)
      Fail("bottom " + std::to_string(j) + " '" + bottom[j]->name() + "' has shape " +
           bottom[j]->shape_string() + "; every bottom needs the batch (" + std::to_string(batch) +
           ") as its first axis");
  auto reshape = [&](Nested& n) {
    for (size_t i = 0; i < n.bottoms.size(); ++i) n.net->input_blobs()[i]->Reshape(bottom[n.bottoms[i]]->shape());
    try {
      n.net->Reshape();
    } catch (const Error& e) {
      Fail(n.label + " for bottoms of batch " + std::to_string(batch) + ": " + e.what());
    }
    n.batch = batch;
  };
  reshape(*gating_);
  const int experts = num_experts();
  if (gating_->output->count() != batch * experts)
    Fail("the gating net's output '" + gating_->output->name() + "' has shape " +
         gating_->output->shape_string() + "; it must hold one probability per expert and sample (" +
         std::to_string(batch) + " × " + std::to_string(experts) + ")");
  std::vector<int> out_shape;
  for (auto& e : experts_) {
    reshape(*e);
    std::vector<int> s = e->output->shape();
    if (s.empty() || s[0] != batch)
      Fail(e->label + " output '" + e->output->name() + "' has shape " + e->output->shape_string() +
           "; its first axis must be the batch (" + std::to_string(batch) + ")");
    if (out_shape.empty()) {
      out_shape = s;
    } else if (s != out_shape) {
      Fail(e->label + " output '" + e->output->name() + "' has shape " + e->output->shape_string() +
           " but expert 0's is " + ShapeString(out_shape) + " (experts must agree)");
    }
  }
  top[0]->Reshape(out_shape);
  if (top.size() > 1) top[1]->Reshape({experts});
  if (top.size() > 2) top[2]->Reshape({experts});
  if (top.size() > 3) top[3]->Reshape({});
  const size_t acc_bytes = static_cast<size_t>(std::max(top[0]->count(), 1)) * 4;
  if (top_type_ != DataType::kFloat32 && (!acc_ || acc_->bytes() < acc_bytes))
    acc_ = device().Allocate(acc_bytes);
  if (identity_rows_ < batch || !identity_) {
    std::vector<int32_t> id(std::max(batch, 1));
    std::iota(id.begin(), id.end(), 0);
    identity_ = device().Allocate(id.size() * 4);
    device().CopyToDevice(id.data(), identity_.get(), 0, id.size() * 4);
    identity_rows_ = static_cast<int>(id.size());
  }
}

std::vector<float> MoeLayer::GateProbabilities() {
  Blob& out = *gating_->output;
  if (!IsQuantized(out.type())) return out.ToFloat();
  std::vector<float> p(out.count());
  quant::DequantizeTensor(out.host_data(), out.count(), gating_->out_layer->TopParams(gating_->out_top),
                          p.data());
  return p;
}

std::vector<std::vector<int>> MoeLayer::SelectExperts(int batch) {
  const int experts = num_experts();
  const std::vector<float> probs = GateProbabilities();
  gates_.assign(static_cast<size_t>(batch) * experts, 0.0f);
  selected_.assign(static_cast<size_t>(batch) * experts, 0);
  counts_.assign(experts, 0);
  std::vector<std::vector<int>> selected(experts);
  for (int b = 0; b < batch; ++b) {
    const float* p = probs.data() + static_cast<size_t>(b) * experts;
    const std::vector<int> sel = TopKRow(p, experts, select_);
    double sum = 0;
    for (int i : sel) sum += p[i];
    for (int i : sel) {
      gates_[static_cast<size_t>(b) * experts + i] =
          sum > 0 ? static_cast<float>(p[i] / sum) : 1.0f / static_cast<float>(select_);
      selected[i].push_back(b);
      selected_[static_cast<size_t>(b) * experts + i] = 1;
      ++counts_[i];
    }
  }
  return selected;
}

void MoeLayer::ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) {
  const int batch = bottom[0]->shape(0);
  const int experts = num_experts();
  FeedInputs(*gating_, bottom, nullptr);
  gating_->net->Forward();
  const std::vector<std::vector<int>> selected = SelectExperts(batch);

  // Calibration (OBSERVE) runs every expert on the whole batch, so each expert's quantizers
  // see data even when no sample of the calibration batches selects it.
  const bool full = full_forward_ || bottom_quantizer(0).mode() == quant::QuantizerMode::kObserve;
  Blob& y = *top[0];
  const int dim = y.count(1);
  DeviceMemory* acc = top_type_ == DataType::kFloat32 ? y.mutable_device_data() : acc_.get();
  if (y.count()) device().Zero(acc, 0, static_cast<size_t>(y.count()) * 4);
  // Each expert runs on its own queue (gather, net, in its scope); the mixing then adds the
  // experts' outputs on the layer's queue in index order, so every mode sums alike.
  for (int e = 0; e < experts; ++e) {
    Rows& r = *rows_[e];
    Nested& ex = *experts_[e];
    r.n = static_cast<int>(selected[e].size());
    r.src.resize(r.n), r.dst.resize(r.n), r.w.resize(r.n);
    for (int k = 0; k < r.n; ++k) {
      const int b = selected[e][k];
      r.dst[k] = b;
      r.src[k] = full ? b : k;
      r.w[k] = gates_[static_cast<size_t>(b) * experts + e];
    }
    ExpertScope scope(*this, e);
    r.Upload(device());
    if (!full && r.n == 0) continue;
    FeedInputs(ex, bottom, full ? nullptr : &r);
    ex.net->Forward();
  }
  JoinExperts();
  for (int e = 0; e < experts; ++e) {
    Rows& r = *rows_[e];
    Nested& ex = *experts_[e];
    if (r.n == 0 || dim == 0) continue;
    const Affine xq = IsQuantized(ex.output->type()) ? ex.out_layer->TopAffine(ex.out_top) : Affine{};
    Kernel k = TypedKernel("scatter_add", ex.output->type());
    k.Arg(int32_t{r.n}).Arg(int32_t{dim}).ArgBuffer(r.src_mem.get(), 0, 4).ArgBuffer(r.dst_mem.get(), 0, 4)
        .ArgBuffer(r.w_mem.get(), 0, 4).ArgBuffer(ex.output->device_data(), 0, SizeOf(ex.output->type()))
        .ArgBuffer(acc, 0, 4).Arg(xq.scale).Arg(int32_t{xq.zero_point});
    k.Launch1D(static_cast<size_t>(r.n) * dim);
  }
  if (top_type_ != DataType::kFloat32 && y.count())
    elementwise().Convert(DataType::kFloat32, top_type_, y.count(), *acc, *y.mutable_device_data(),
                          Affine{}, TopAffine(0));

  std::vector<float> observed(experts), expected(experts, static_cast<float>(select_) / experts);
  for (int e = 0; e < experts; ++e) observed[e] = static_cast<float>(counts_[e]) / std::max(batch, 1);
  if (top.size() > 1) top[1]->FromFloat(observed);
  if (top.size() > 2) top[2]->FromFloat(expected);
  if (top.size() > 3)
    top[3]->FromFloat({static_cast<float>(LoadBalancingLoss(counts_, std::max(batch, 1), select_))});
}

std::vector<float> MoeLayer::GateGradient(const std::vector<Blob*>& top, int batch) {
  const int experts = num_experts();
  const int dim = top[0]->count(1);
  DeviceMemory* dy = top[0]->device_diff();
  // dL/dg for every selected (sample, expert): <dy_b, expert output_b>.
  std::vector<float> dg(static_cast<size_t>(batch) * experts, 0.0f);
  for (int e = 0; e < experts; ++e) {
    Rows& r = *rows_[e];
    if (!r.n || !dim) continue;
    Kernel k = TrainKernel("row_dot");
    k.Arg(int32_t{r.n}).Arg(int32_t{dim}).ArgBuffer(r.src_mem.get(), 0, 4).ArgBuffer(r.dst_mem.get(), 0, 4)
        .ArgBuffer(experts_[e]->output->device_data(), 0, 4).ArgBuffer(dy, 0, 4)
        .ArgBuffer(r.g_mem.get(), 0, 4);
    k.Launch1D(r.n);
    std::vector<float> g(r.n);
    device().CopyToHost(r.g_mem.get(), 0, g.data(), r.n * 4);
    for (int k2 = 0; k2 < r.n; ++k2) dg[static_cast<size_t>(r.dst[k2]) * experts + e] = g[k2];
  }
  // dL/dp through the renormalization g_i = p_i / P (P = Σ_selected p).
  const std::vector<float> probs = GateProbabilities();
  std::vector<float> dp(static_cast<size_t>(batch) * experts, 0.0f);
  for (int b = 0; b < batch; ++b) {
    const size_t o = static_cast<size_t>(b) * experts;
    double P = 0, s = 0;
    for (int i = 0; i < experts; ++i)
      if (selected_[o + i]) P += probs[o + i];
    for (int i = 0; i < experts; ++i) s += gates_[o + i] * dg[o + i];
    if (P <= 0) continue;
    for (int i = 0; i < experts; ++i)
      if (selected_[o + i]) dp[o + i] = static_cast<float>((dg[o + i] - s) / P);
  }
  // Count tops: straight-through estimate c_i / B ≈ (K / B) Σ_b p_bi.
  std::vector<double> dobs(experts, 0.0);
  if (top.size() > 1) {
    const float* d1 = HostDiff(*top[1]);
    for (int i = 0; i < experts; ++i) dobs[i] += d1[i];
  }
  if (top.size() > 3) {
    const float d3 = HostDiff(*top[3])[0];
    for (int i = 0; i < experts; ++i) {
      const double obs = static_cast<double>(counts_[i]) / batch;
      dobs[i] += d3 * 2.0 / experts * (obs - static_cast<double>(select_) / experts);
    }
  }
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < experts; ++i)
      dp[static_cast<size_t>(b) * experts + i] += static_cast<float>(dobs[i] * select_ / batch);
  return dp;
}

void MoeLayer::BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& down,
                            const std::vector<Blob*>& bottom) {
  const int batch = bottom[0]->shape(0);
  const int experts = num_experts();
  Blob& y = *top[0];
  const int dim = y.count(1);
  DeviceMemory* dy = y.device_diff();
  for (size_t j = 0; j < bottom.size(); ++j)
    if (down[j] && bottom[j]->count()) device().Zero(bottom[j]->mutable_device_diff(), 0, bottom[j]->bytes());

  const std::vector<float> dp = GateGradient(top, batch);
  std::memcpy(gating_->output->mutable_host_diff(), dp.data(), dp.size() * 4);
  gating_->net->Backward();
  for (size_t i = 0; i < gating_->bottoms.size(); ++i) {
    const int j = gating_->bottoms[i];
    Blob& in = *gating_->net->input_blobs()[i];
    if (down[j] && in.count())
      elementwise().Axpby(DataType::kFloat32, in.count(), 1.0f, *in.device_diff(), 1.0f,
                          *bottom[j]->mutable_device_diff());
  }

  // Experts: output diff w·dy on their rows and backward, each on its own queue; then their
  // input diffs are added to the bottoms' rows on the layer's queue, in index order.
  for (int e = 0; e < experts; ++e) {
    Rows& r = *rows_[e];
    Nested& ex = *experts_[e];
    if (!r.n) continue;
    ExpertScope scope(*this, e);
    Blob& out = *ex.output;
    if (out.count()) device().Zero(out.mutable_device_diff(), 0, out.bytes());
    if (dim) {
      Kernel k = TrainKernel("rows_scaled");
      k.Arg(int32_t{r.n}).Arg(int32_t{dim}).ArgBuffer(r.src_mem.get(), 0, 4).ArgBuffer(r.dst_mem.get(), 0, 4)
          .ArgBuffer(r.w_mem.get(), 0, 4).ArgBuffer(dy, 0, 4).ArgBuffer(out.mutable_device_diff(), 0, 4);
      k.Launch1D(static_cast<size_t>(r.n) * dim);
    }
    ex.net->Backward();
  }
  JoinExperts();
  for (int e = 0; e < experts; ++e) {
    Rows& r = *rows_[e];
    Nested& ex = *experts_[e];
    if (!r.n) continue;
    for (size_t i = 0; i < ex.bottoms.size(); ++i) {
      const int j = ex.bottoms[i];
      Blob& in = *ex.net->input_blobs()[i];
      const int idim = bottom[j]->count(1);
      if (!down[j] || !idim) continue;
      Kernel k = TrainKernel("rows_add");
      k.Arg(int32_t{r.n}).Arg(int32_t{idim}).ArgBuffer(r.src_mem.get(), 0, 4).ArgBuffer(r.dst_mem.get(), 0, 4)
          .ArgBuffer(in.device_diff(), 0, 4).ArgBuffer(bottom[j]->mutable_device_diff(), 0, 4);
      k.Launch1D(static_cast<size_t>(r.n) * idim);
    }
  }
}

void MoeLayer::ParamsChanged() {
  for (Net* n : nested_nets()) n->ParamsUpdated();
}

void RegisterNetLayers() {
  // Reads bottom_data_type, writes top_data_type; the count and loss tops are fp32.
  LayerTyping typing;
  typing.reads_bottom_type = typing.writes_top_type = true;
  typing.fp32_tops_from = 1;
  RegisterLayerType<MoeLayer>("MOE", typing);
}

}  // namespace mpcaffe
