// layers/loss_kernels.h — kernel texts of the loss and accuracy layers' forward passes (the
// per-position terms a device reduction then averages), float types only, written once and
// emitted through KernelWriter for either dialect. Their backward passes are in
// train_kernels.h.
#pragma once

#include <string>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"

namespace mpcaffe {

/// softmax_loss_<dt>(int outer, int channels, int inner, In prob, In label, Out float loss,
///                   int ignore_label, int has_ignore)
/// loss[j] = −log(max(prob[label_j], FLT_MIN)) per (outer, inner) position j, or −1 when the
/// label is the ignored one, NaN when the label lies outside [0, channels). Float types only.
std::string SoftmaxLossSource(const KernelTarget& target, DataType type);

/// sigmoid_ce_<dt>(int n, In Dtype x, In Dtype target, Out float loss, int ignore_label,
///                 int has_ignore): loss[i] = max(0, log(1 + e^−|x|) − x·(t − (x >= 0))), BVLC's
/// overflow-free cross-entropy of sigmoid(x) against target t in [0, 1] (never negative for
/// such targets; clamped so rounding cannot mark it ignored), or −1 where t is the ignored
/// label. Float types only.
std::string SigmoidCrossEntropySource(const KernelTarget& target, DataType type);

/// accuracy_<dt>(int outer, int channels, int inner, In x, In label, Out float correct,
///               int top_k, int ignore_label, int has_ignore)
/// correct[j] = 1 when fewer than top_k classes score strictly higher than the labelled one,
/// 0 otherwise, −1 when ignored. Float types only.
std::string AccuracySource(const KernelTarget& target, DataType type);

/// sqdiff_<dt>(int n, In a, In b, Out float d): d[i] = (a[i] − b[i])² in float.
std::string SquaredDifferenceSource(const KernelTarget& target, DataType type);

/// hinge_<dt>(int num, int dim, In Dtype x, In Dtype label, Out float v, int l2): BVLC's hinge
/// loss terms of a (num, dim) score array, m = max(0, 1 ± x) (− at the labelled class, + at the
/// others), v = m (L1) or m² (L2); NaN in a row whose label lies outside [0, dim). Float types.
std::string HingeLossSource(const KernelTarget& target, DataType type);

/// multinomial_logistic_<dt>(int num, int dim, In Dtype prob, In Dtype label, Out float loss):
/// loss[r] = −log(max(prob[r, label_r], 1e-20)) of a (num, dim) probability array; NaN where the
/// label lies outside [0, dim). Float types.
std::string MultinomialLogisticLossSource(const KernelTarget& target, DataType type);

/// contrastive_<dt>(int num, int dim, In Dtype a, In Dtype b, In Dtype y, Out float loss,
///                  Out float dist_sq, float margin, int legacy): per row r of two (num, dim)
/// arrays d² = ‖a_r − b_r‖² (kept in dist_sq for the backward pass) and loss[r] = d² when y_r
/// is not 0 (similar), else max(0, margin − d)² (legacy: max(0, margin − d²)). Float types.
std::string ContrastiveLossSource(const KernelTarget& target, DataType type);

/// infogain_<dt>(int outer, int channels, int inner, In Dtype prob, In Dtype label, In Dtype h,
///               Out float loss, int ignore_label, int has_ignore): per (outer, inner)
/// position j of an (outer, channels, inner) probability array,
/// loss[j] = −Σ_c H[label_j, c]·log(max(prob_c, 1e-20)) with H a channels × channels matrix;
/// −3.4e38 (masked_mean's ignore mark, below any loss) at ignored positions, NaN where the label
/// lies outside [0, channels). Float types.
std::string InfogainLossSource(const KernelTarget& target, DataType type);

}  // namespace mpcaffe
