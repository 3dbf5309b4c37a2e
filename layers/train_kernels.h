// layers/train_kernels.h — kernel texts of the fp32 training path outside libdnn: backward passes
// of the activation, loss, structure and normalization layers, the device reductions (loss
// means, per-channel sums, squared norms) and the solvers' update rules. Each body is written
// once and emitted through KernelWriter for either dialect; every kernel is launched with
// work-groups of kReduceLocalSize (= kLaunch1DLocalSize), so ProgramHints::OneDimensional()
// describes all of them.
#pragma once

#include <string>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"

namespace mpcaffe {

/// Work-group size of the reduction kernels (one group per reduced value).
inline constexpr int kReduceLocalSize = 64;
static_assert(kReduceLocalSize == static_cast<int>(kLaunch1DLocalSize),
              "training programs are specialized for one local size");

/// relu_backward(int n, In x, In dy, Out dx, float slope): dx = dy·(x > 0 ? 1 : slope).
std::string ReluBackwardSource(const KernelTarget& target);

/// softmax_backward(int outer, int channels, int inner, In y, In dy, Out dx):
/// dx = (dy − Σ_c dy·y)·y along the channel axis of an (outer, channels, inner) array.
std::string SoftmaxBackwardSource(const KernelTarget& target);

/// softmax_loss_backward(int outer, int channels, int inner, In prob, In label, In top_diff,
///                       In norm, Out dx, int ignore_label, int has_ignore):
/// dx = (prob − onehot(label))·top_diff[0] / norm[0]; 0 at ignored positions and at labels
/// outside [0, channels) (whose forward loss is NaN).
std::string SoftmaxLossBackwardSource(const KernelTarget& target);

/// masked_mean_<dt>(int n, In float v, Out Otype out, Out float norm, float fixed_norm,
///                  int use_count, float ignore_below), one work-group of kReduceLocalSize: with
/// s = Σ v[i] and c = #i over the v[i] that are not below ignore_below (0 for losses that are
/// never negative, a negative value marking "ignored"; NaN is counted),
/// norm[0] = max(1, use_count ? c : fixed_norm) and out[0] = s / norm[0] in out's type.
std::string MaskedMeanSource(const KernelTarget& target, DataType out_type);
/// "masked_mean_fp32", "masked_mean_fp16".
std::string MaskedMeanKernelName(DataType out_type);

/// sigmoid_ce_backward(int n, In x, In target, In top_diff, In norm, Out dx, int ignore_label,
///                     int has_ignore): dx = (sigmoid(x) − t)·top_diff[0] / norm[0]; 0 where t
/// is the ignored label.
std::string SigmoidCrossEntropyBackwardSource(const KernelTarget& target);

/// euclidean_backward(int n, In a, In b, In top_diff, Out dx, float alpha):
/// dx = alpha·top_diff[0]·(a − b).
std::string EuclideanBackwardSource(const KernelTarget& target);

/// hinge_backward(int num, int dim, In x, In label, In top_diff, Out dx, int l2, float inv_num):
/// dx = ±g·top_diff[0]·inv_num with m = 1 ± x (− at the labelled class), g = [m > 0] (L1) or
/// 2·max(0, m) (L2); 0 in rows whose label lies outside [0, dim).
std::string HingeLossBackwardSource(const KernelTarget& target);

/// multinomial_logistic_backward(int num, int dim, In prob, In label, In top_diff, Out dx,
/// float inv_num): dx = −top_diff[0]·inv_num / max(prob, 1e-20) at the labelled class, else 0.
std::string MultinomialLogisticLossBackwardSource(const KernelTarget& target);

/// contrastive_backward(int num, int dim, In a, In b, In y, In dist_sq, In top_diff, Out dx,
///                      float alpha, float margin, int legacy): with s = alpha·top_diff[0]
/// (alpha = ±1/num for the first / second bottom) and d = a − b: similar rows dx = s·d;
/// dissimilar ones −s·d where margin − d² > 0 (legacy), else −s·(margin − dist)/(dist + 1e-4)·d
/// where margin − dist > 0; 0 otherwise.
std::string ContrastiveLossBackwardSource(const KernelTarget& target);

/// infogain_backward(int outer, int channels, int inner, In prob, In label, In h, In top_diff,
///                   In norm, Out dx, int ignore_label, int has_ignore): the gradient of the
/// softmax scores, dx = (prob·Σ_c H[label, c] − H[label, c])·top_diff[0] / norm[0]; 0 at ignored
/// positions and at labels outside [0, channels).
std::string InfogainLossBackwardSource(const KernelTarget& target);

/// lrn_within_backward(int n, int height, int width, int size, float alpha, float beta, In x,
///                     In y, In dy, In scale, Out dx): the WITHIN_CHANNEL LRN's gradient,
/// dx = dy·s^(−beta) − (2·alpha·beta/size²)·x·Σ dy'·y'/s' over the windows holding the pixel
/// (the same size × size neighbourhood: odd windows are symmetric).
std::string LrnWithinChannelBackwardSource(const KernelTarget& target);

/// concat_backward(int n, In dy, Out dx, int bottom_axis, int top_axis, int inner, int offset):
/// the bottom's (outer, bottom_axis, inner) slice at channel `offset` of an
/// (outer, top_axis, inner) top diff.
std::string ConcatBackwardSource(const KernelTarget& target);

/// Two kernels for Eltwise MAX's backward:
/// argmax_update(int n, In x, Out best, Out int arg, int j): j == 0 starts (best = x, arg = 0),
///   later bottoms replace the best only when strictly larger (the first maximum wins, as BVLC);
/// max_select(int n, In dy, In int arg, Out dx, int i): dx = arg == i ? dy : 0.
std::string EltwiseMaxBackwardSource(const KernelTarget& target);

/// Eltwise PROD's backward with stable_prod_grad false (BVLC's faster form):
/// prod_quotient(int n, In dy, In y, In x, Out dx): dx = dy·y / x (NaN or ±inf where x is 0, as
/// BVLC's).
std::string EltwiseProdBackwardSource(const KernelTarget& target);

/// channel_sum(int outer, int channels, int inner, In a, In b, Out out, int use_b, float alpha,
///             float beta): out[c] = alpha·Σ_{o,i} a·(use_b ? b : 1) + beta·out[c] (out[c] is
/// not read when beta is 0), over an (outer, channels, inner) layout; one work-group of
/// kReduceLocalSize per channel (launch min(channels, cap) groups). With outer = channels = 1
/// it is the sum (of squares, with b = a) of a whole array.
std::string ChannelSumSource(const KernelTarget& target);
/// Launches `k`, channel_sum of ChannelSumSource: out[c] = alpha·Σ a·(b ? b : 1) + beta·out[c]
/// over an (outer, channels, inner) layout of fp32 buffers.
void LaunchChannelSum(Device& device, Kernel k, int outer, int channels, int inner,
                      DeviceMemory* a, DeviceMemory* b, DeviceMemory* out, float alpha, float beta);

/// BatchNorm's kernels (fp32):
/// bn_subtract(int n, int channels, int inner, In x, In mean, Out y): y = x − mean[c];
/// bn_statistics(int channels, In mean, In var, Out blob0, Out blob1, Out blob2, Out inv_std,
///   float maf, float correction, float eps): BVLC's moving averages (blob2 = blob2·maf + 1,
///   blob0 = mean + maf·blob0, blob1 = correction·var + maf·blob1) and inv_std = 1/√(var + eps);
/// bn_backward(int n, int channels, int inner, In dy, In y, In s1, In s2, In inv_std, Out dx):
///   dx = (dy − s2[c] − s1[c]·y)·inv_std[c] (s1 = mean(dy·y), s2 = mean(dy) per channel).
std::string BatchNormSource(const KernelTarget& target);

/// bn_fold_<pt>(int channels, In Ptype mean, In Ptype var, In Ptype sf, Out float scale,
///              Out float bias, float eps): BatchNorm's global statistics (stored in the
/// layer's float type `param_type`) folded into y = scale·x + bias in fp32:
/// f = sf ? 1/sf : 0, scale = 1/√(var·f + eps), bias = −mean·f·scale.
std::string BatchNormFoldSource(const KernelTarget& target, DataType param_type);
std::string BatchNormFoldKernelName(DataType param_type);

/// The solver's kernels (fp32 parameters):
/// regularize(int n, In w, Out d, float norm, float decay, int l1):
///   d = d·norm + decay·(l1 ? sign(w) : w);
/// clip_scale(int n, Out d, In sumsq, float clip): d ·= clip / ‖g‖ when ‖g‖ = √sumsq[0] > clip.
std::string SolverCommonSource(const KernelTarget& target);

/// update_<rule>(int n, Out w, Out d, Out h, Out u, float lr, float m1, float m2, float delta,
///               float correction, float norm, float decay, int l1) — BVLC's update rules for
/// `rule` in "SGD", "Nesterov", "AdaGrad", "RMSProp" (m2 = rms_decay), "AdaDelta"
/// (m1 = momentum, u = update history), "Adam" (m1 = β1, m2 = β2, u = second moment,
/// correction = √(1 − β2^t)/(1 − β1^t)) on the gradient g = d·norm + decay·(l1 ? sign(w) : w)
/// (regularize fused; norm 1, decay 0 after a separate regularize): d = the update (with the
/// history h, u advanced), then w −= d.
std::string SolverUpdateSource(const KernelTarget& target, const std::string& rule);

/// "update_sgd", "update_adam", ...
std::string SolverUpdateKernelName(const std::string& rule);

}  // namespace mpcaffe
