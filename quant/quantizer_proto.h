// quant/quantizer_proto.h — Quantizer state to and from caffe::QuantizerParameter, so a
// calibrated model carries its observed ranges.
#pragma once

#include <optional>
#include <string>

#include "codegen/datatype.h"
#include "proto/caffe.pb.h"
#include "quant/quantizer.h"

namespace mpcaffe::quant {

/// The proto DataType of a data type (CAFFE_FLOAT, CAFFE_HALF, CAFFE_INT16_QUANTIZED,
/// CAFFE_INT8_QUANTIZED).
caffe::DataType ToProtoDataType(DataType type);
/// The data type of a proto DataType: the inverse of ToProtoDataType (the one mapping), or
/// nullopt for the types mpcaffe does not compute in (DOUBLE, INT32/INT64_QUANTIZED,
/// PACKED_BINARY).
std::optional<DataType> DataTypeOfProto(caffe::DataType type);
/// "data type X is not one mpcaffe computes in (CAFFE_FLOAT, …)" for such a type.
std::string UnsupportedProtoDataType(caffe::DataType type);
/// DataTypeOfProto, or mpcaffe::Error naming QuantizerParameter.`field`.
DataType FromProtoDataType(caffe::DataType type, const char* field);

/// Writes name, zone, input/output data types, mode, pseudo target and reset flag, the
/// observed range (only when something was observed; reads the device), and the explicit
/// input/output ranges that are set. ACTIVE has no proto value and is written as
/// CAFFE_QUANT_PASSIVE (the active state follows from the layer's data types). The `device`
/// field is left at its default: the quantizer's device is chosen by its owner.
void ToProto(Quantizer& quantizer, caffe::QuantizerParameter* param);

/// Applies a QuantizerParameter to a quantizer: mode (PASSIVE, OBSERVE, PSEUDO), data types,
/// pseudo settings, the observed range (when both observed_min and observed_max are present;
/// otherwise the observations are reset) and the explicit ranges present. Name and zone are
/// the owner's business and are not changed. Throws mpcaffe::Error for data types mpcaffe
/// does not compute in.
void FromProto(const caffe::QuantizerParameter& param, Quantizer* quantizer);

}  // namespace mpcaffe::quant
