// quant/quantizer_mode.h — the modes a net's quantizers run in (passive, observe, pseudo,
// active): part of the public header set, so a program can set a Net's quant_mode without the
// Quantizer class (quant/quantizer.h, internal).
#pragma once

namespace mpcaffe::quant {

/// Values 0..2 are the proto's QuantizerMode (CAFFE_QUANT_PASSIVE/OBSERVE/PSEUDO); kActive is
/// ours (the low-precision modes: parameters handed to kernels, conversions between types).
enum class QuantizerMode { kPassive = 0, kObserve = 1, kPseudo = 2, kActive = 3 };

/// "passive", "observe", "pseudo" or "active".
const char* QuantizerModeName(QuantizerMode mode);

}  // namespace mpcaffe::quant
