// proto/upgrade.h — upgrades of old Caffe network and solver definitions to the current format,
// following the rules of BVLC Caffe (so files from 2013-2016 load as BVLC loads them).
#pragma once

#include <string>

#include "proto/caffe.pb.h"

namespace mpcaffe {

/// True when `net` (or a net nested in one of its MOE layers) uses a deprecated form that
/// UpgradeNetAsNeeded rewrites.
bool NetNeedsUpgrade(const caffe::NetParameter& net);

/// Rewrites `*net` in place to the current format, in BVLC's order:
///  1. V0 layers (`layers { layer { type: "conv" ... } }`), with their "padding" layers folded
///     into the following convolution / pooling, become V1 layers;
///  2. V1 data layers' deprecated scale / mean_file / crop_size / mirror move to transform_param
///     (also done for current-format data layers);
///  3. V1 `layers` become `layer` (enum type to type name, blobs_lr / weight_decay / param names
///     to ParamSpec);
///  4. `input` + `input_shape` / `input_dim` become an Input layer at the front;
///  5. BatchNorm layers with three param specs get lr_mult = decay_mult = 0 (their blobs are
///     statistics, not learned).
/// Nets nested in MOE layers are upgraded too. Returns whether anything changed. Throws
/// ModelFileError naming `source` and the layer when the net cannot be upgraded (e.g. both
/// `layer` and `layers` present, an unknown V0 type, a V0 field that does not fit the layer).
bool UpgradeNetAsNeeded(const std::string& source, caffe::NetParameter* net);

/// True when `solver` uses the deprecated `solver_type` enum or holds an inline net that needs
/// an upgrade.
bool SolverNeedsUpgrade(const caffe::SolverParameter& solver);

/// Replaces the deprecated `solver_type` enum by the `type` string ("SGD", "Nesterov",
/// "AdaGrad", "RMSProp", "AdaDelta", "Adam") and upgrades inline nets. Returns whether anything
/// changed. Throws ModelFileError naming `source` when both `solver_type` and `type` are given.
bool UpgradeSolverAsNeeded(const std::string& source, caffe::SolverParameter* solver);

/// The current type name of a V1 layer type (e.g. SOFTMAX_LOSS -> "SoftmaxWithLoss"); empty for
/// NONE.
std::string V1LayerTypeName(caffe::V1LayerParameter::LayerType type);

}  // namespace mpcaffe
