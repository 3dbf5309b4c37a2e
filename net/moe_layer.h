// net/moe_layer.h — the mixture-of-experts layer (MOE: a gating net and N expert nets nested
// inside the layer, top-K experts per sample, outputs mixed by the renormalized gate
// probabilities, load-balancing counts and loss). It lives in net/ beside the Net it nests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"

namespace mpcaffe {

class Net;

/// kernels of the MOE layer, one body each, emitted for any data type and either dialect:
///   moe_gather_<dt>(int rows, int dim, In Dtype x, In int idx, Out Dtype y)
///       y[r·dim + d] = x[idx[r]·dim + d]                    (raw storage copy)
///   moe_scatter_add_<dt>(int rows, int dim, In int src, In int dst, In float w, In Dtype x,
///                        Out float acc, float scale, int zero)
///       acc[dst[r]·dim + d] += w[r] · scale · (x[src[r]·dim + d] − zero)
/// and fp32-only training kernels (in the program of DataType::kFloat32):
///   moe_row_dot(int rows, int dim, In int src, In int dst, In float x, In float dy, Out float g)
///       g[r] = Σ_d x[src[r]·dim + d] · dy[dst[r]·dim + d]
///   moe_rows_scaled(int rows, int dim, In int src, In int dst, In float w, In float dy,
///                   Out float y)           y[src[r]·dim + d] = w[r] · dy[dst[r]·dim + d]
///   moe_rows_add(int rows, int dim, In int src, In int dst, In float x, Out float y)
///       y[dst[r]·dim + d] += x[src[r]·dim + d]
std::string MoeSource(const KernelTarget& target, DataType type);
/// "moe_<op>_<dt>" for the typed kernels, "moe_<op>" for the fp32 training ones.
std::string MoeKernelName(const std::string& op, DataType type);

/// Host reference of the gate selection: for each of `batch` rows of `experts` probabilities,
/// the `k` largest (ties: lower index first), their weights p / Σ_selected p (equal weights
/// when that sum is 0), written as a dense batch × experts matrix (zero when not selected).
std::vector<float> SelectTopK(const std::vector<float>& probs, int batch, int experts, int k);

/// Equation 1.11: (1/N) Σ_i (K/N − c_i/B)² for the counts c_i of how many of the B samples
/// selected expert i.
double LoadBalancingLoss(const std::vector<int>& counts, int batch, int k);

/// MOE layer. Bottoms feed the gating net, the experts or both (MOEParameter.map_bottom, one
/// entry per bottom, default GATING_AND_EXPERT): the nested nets' Input tops take them in order.
/// Tops: 0 the mixed expert output (B × expert output shape, in top_data_type);
/// 1 observed counts c_i / B and 2 expected counts K / N (shape N, fp32; BVLC's EuclideanLoss
/// between them is ½ of eq. 1.11); 3 (optional) the loss of eq. 1.11 itself (fp32 scalar).
/// The gating net's single output (B × N) is read as the probabilities p (the paper's nets end
/// in Softmax; noise, eqs. 1.9–1.10, is part of the gating net through Noise and DummyData
/// layers and is switched off in TEST: Noise gives its mean, DummyData its fillers' means).
/// full_forward runs every expert on the whole batch; otherwise each expert runs once on the
/// rows that selected it (gathered, then scattered back); the mixing adds experts in index
/// order either way. Backward (fp32) reaches the bottoms through the experts and the gating
/// net (dp from the mixing weights, plus a straight-through estimate c_i/B ≈ (K/B)·Σ_b p_bi for
/// the count tops' gradients).
/// The experts run on queues of their own (one per expert; MPCAFFE_MOE_QUEUES=n spreads them over
/// n, 0 or 1 keeps them on the layer's queue), so a device can overlap them: in grouped mode
/// each expert's gather, net and backward go to its queue; the gating net, the mixing and the
/// bottoms' gradients stay on the layer's queue, which waits for the experts before mixing.
class MoeLayer : public Layer {
 public:
  MoeLayer(const caffe::LayerParameter& param, Device& device);
  ~MoeLayer() override;
  const char* type() const override { return "MOE"; }
  bool SupportsType(DataType) const override { return true; }
  DataType bottom_type(int i) const override { return bottom_type_; }
  DataType top_type(int i) const override { return i == 0 ? top_type_ : DataType::kFloat32; }
  int MinBottomBlobs() const override { return 1; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 4; }
  bool HasBackward() const override { return true; }

  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void ParamsChanged() override;

  /// The nested nets: 0 the gating net, 1 + e expert instance e (expert_net k repeated
  /// expert_instances(k) times, in order).
  std::vector<Net*> nested_nets() const override;
  /// "gating", "expert<e>".
  std::string nested_net_name(int k) const override;
  /// Saved in moe_param: the gating net in gating_net, each expert instance in an expert_net
  /// entry of its own (expert_instances cleared). Reading a layer that holds another number of
  /// expert nets than the layer has expert instances throws NetError.
  std::vector<caffe::NetParameter*> SavedNestedNets(caffe::LayerParameter* saved) const override;
  std::vector<const caffe::NetParameter*> SavedNestedNets(
      const caffe::LayerParameter& saved) const override;
  int num_experts() const { return static_cast<int>(experts_.size()); }
  /// Queues the experts run on (0: the layer's own queue).
  int num_queues() const { return static_cast<int>(queues_.size()); }
  /// The dense B × N mixing weights and the per-expert counts of the last Forward.
  const std::vector<float>& gates() const { return gates_; }
  const std::vector<int>& counts() const { return counts_; }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void BackwardImpl(const std::vector<Blob*>& top, const std::vector<bool>& propagate_down,
                    const std::vector<Blob*>& bottom) override;

 private:
  struct Nested;
  struct Rows;
  class ExpertScope;
  /// Waits for the expert queues that an ExpertScope used since the last join.
  void JoinExperts();
  /// Builds nested net `np` fed by the layer's bottoms `bottoms` (expert instance `instance`
  /// renames its layers "<name>_i<instance>" when > 0).
  std::unique_ptr<Nested> BuildNested(caffe::NetParameter np, const std::string& label,
                                      std::vector<int> bottoms, int instance);
  void CheckNested(Nested& nested);
  /// The gate selection of the last gating Forward (gates_, selected_, counts_); returns the
  /// samples each expert handles, in order.
  std::vector<std::vector<int>> SelectExperts(int batch);
  /// dL/dp for the gating net's output: through the mixing weights and the count tops.
  std::vector<float> GateGradient(const std::vector<Blob*>& top, int batch);
  void FeedInputs(Nested& net, const std::vector<Blob*>& bottom, const Rows* rows);
  std::vector<float> GateProbabilities();
  Kernel TypedKernel(const std::string& op, DataType type);
  Kernel TrainKernel(const std::string& op);

  DataType bottom_type_, top_type_;
  std::unique_ptr<Nested> gating_;
  std::vector<std::unique_ptr<Nested>> experts_;
  int select_ = 1;
  bool full_forward_ = false;
  std::vector<float> gates_;                 // B × N
  std::vector<uint8_t> selected_;            // B × N: 1 where the sample chose the expert
  std::vector<int> counts_;                  // N
  std::vector<std::unique_ptr<Rows>> rows_;  // per expert: selected rows of the last Forward
  std::shared_ptr<DeviceMemory> acc_;        // B × D float mixing accumulator (non-fp32 tops)
  std::shared_ptr<DeviceMemory> identity_;   // 0 … B−1 as int32
  int identity_rows_ = 0;
  std::vector<std::unique_ptr<Queue>> queues_;  // the experts' queues (empty: the layer's own)
  bool queues_busy_ = false;                    // work was sent to queues_ since the last join
};

}  // namespace mpcaffe
