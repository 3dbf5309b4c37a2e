// quant/quantizer_proto.cc — Quantizer state to and from caffe::QuantizerParameter.
#include "quant/quantizer_proto.h"

#include <optional>
#include <string>

#include "device/error.h"

namespace mpcaffe::quant {

caffe::DataType ToProtoDataType(DataType type) {
  switch (type) {
    case DataType::kFloat32: return caffe::CAFFE_FLOAT;
    case DataType::kFloat16: return caffe::CAFFE_HALF;
    case DataType::kInt16Q: return caffe::CAFFE_INT16_QUANTIZED;
    case DataType::kInt8Q: return caffe::CAFFE_INT8_QUANTIZED;
  }
  throw Error("ToProtoDataType: unknown data type");
}

std::optional<DataType> DataTypeOfProto(caffe::DataType type) {
  for (DataType t : kAllDataTypes)
    if (ToProtoDataType(t) == type) return t;
  return std::nullopt;
}

std::string UnsupportedProtoDataType(caffe::DataType type) {
  std::string names;
  for (DataType t : kAllDataTypes)
    names += (names.empty() ? "" : ", ") + caffe::DataType_Name(ToProtoDataType(t));
  return "data type " + caffe::DataType_Name(type) + " is not one mpcaffe computes in (" + names +
         ")";
}

DataType FromProtoDataType(caffe::DataType type, const char* field) {
  if (const std::optional<DataType> t = DataTypeOfProto(type)) return *t;
  throw Error(std::string("QuantizerParameter.") + field + ": " + UnsupportedProtoDataType(type));
}

void ToProto(Quantizer& q, caffe::QuantizerParameter* param) {
  param->Clear();
  if (!q.name().empty()) param->set_name(q.name());
  param->set_zone(q.zone());
  param->set_input_data_type(ToProtoDataType(q.input_type()));
  param->set_output_data_type(ToProtoDataType(q.output_type()));
  switch (q.mode()) {
    case QuantizerMode::kObserve:
      param->set_mode(caffe::CAFFE_QUANT_OBSERVE);
      break;
    case QuantizerMode::kPseudo:
      param->set_mode(caffe::CAFFE_QUANT_PSEUDO);
      break;
    case QuantizerMode::kActive:
      param->set_mode(caffe::CAFFE_QUANT_ACTIVE);
      break;
    case QuantizerMode::kPassive:
      param->set_mode(caffe::CAFFE_QUANT_PASSIVE);
      break;
  }
  param->set_pseudo_target_type(ToProtoDataType(q.pseudo_target_type()));
  param->set_pseudo_reset_observed(q.pseudo_reset_observed());
  if (q.weight_bits() != 8) param->set_weight_bits(q.weight_bits());
  for (float sc : q.channel_scales()) param->add_channel_scale(sc);
  if (q.weight_scale_method() != Int4ScaleMethod::kMinMse)
    param->set_weight_scale_method(caffe::QuantizerParameter::WEIGHT_SCALE_ABSMAX);
  if (q.has_observed()) {
    param->set_observed_min(q.observed_min());
    param->set_observed_max(q.observed_max());
  }
  if (q.has_input_range()) {
    param->set_min_in(q.min_in());
    param->set_max_in(q.max_in());
  }
  if (q.has_output_range()) {
    param->set_min_out(q.min_out());
    param->set_max_out(q.max_out());
  }
}

void FromProto(const caffe::QuantizerParameter& param, Quantizer* q) {
  const DataType input = FromProtoDataType(param.input_data_type(), "input_data_type");
  const DataType output = FromProtoDataType(param.output_data_type(), "output_data_type");
  const DataType pseudo = FromProtoDataType(param.pseudo_target_type(), "pseudo_target_type");
  q->set_types(input, output);
  q->set_pseudo_target_type(pseudo);
  q->set_pseudo_reset_observed(param.pseudo_reset_observed());
  switch (param.mode()) {
    case caffe::CAFFE_QUANT_OBSERVE:
      q->set_mode(QuantizerMode::kObserve);
      break;
    case caffe::CAFFE_QUANT_PSEUDO:
      q->set_mode(QuantizerMode::kPseudo);
      break;
    case caffe::CAFFE_QUANT_ACTIVE:
      q->set_mode(QuantizerMode::kActive);
      break;
    default:
      q->set_mode(QuantizerMode::kPassive);
      break;
  }
  if (param.weight_bits() != 8 && param.weight_bits() != 4)
    throw Error("QuantizerParameter.weight_bits: " + std::to_string(param.weight_bits()) +
                " is not supported (8, or 4 for Convolution / InnerProduct weights of int8 nets)");
  q->set_weight_bits(static_cast<int>(param.weight_bits()));
  q->set_channel_scales(std::vector<float>(param.channel_scale().begin(), param.channel_scale().end()));
  q->set_weight_scale_method(param.weight_scale_method() ==
                                     caffe::QuantizerParameter::WEIGHT_SCALE_ABSMAX
                                 ? Int4ScaleMethod::kAbsMax
                                 : Int4ScaleMethod::kMinMse);
  if (param.has_observed_min() && param.has_observed_max())
    q->SetObserved(param.observed_min(), param.observed_max());
  else
    q->ResetObserved();
  if (param.has_min_in() || param.has_max_in()) q->SetInputRange(param.min_in(), param.max_in());
  if (param.has_min_out() || param.has_max_out())
    q->SetOutputRange(param.min_out(), param.max_out());
}

}  // namespace mpcaffe::quant
