// tests/quant/quantizer_proto_test.cc — Quantizer state round-trips through
// caffe::QuantizerParameter (binary and text format), so calibrated ranges survive a save.
#if __has_include("proto/caffe.pb.h")
#include "quant/quantizer_proto.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <vector>

#include "device/device.h"
#include "device/error.h"

namespace mpcaffe::quant {
namespace {

TEST(QuantizerProto, CalibratedRangeRoundTrips) {
  Device& d = DefaultDevice();
  Quantizer q(d, "conv1", 2);
  q.set_mode(QuantizerMode::kObserve);
  q.set_types(DataType::kFloat32, DataType::kInt8Q);
  q.set_pseudo_target_type(DataType::kInt16Q);
  q.set_pseudo_reset_observed(true);
  q.SetOutputRange(-1.5, 4.25);
  std::vector<float> v = {0.25f, -3.5f, 9.0f};
  auto buffer = d.Alloc<float>(v.size());
  d.Write(buffer, v.data(), v.size());
  q.Forward(buffer, v.size());

  caffe::QuantizerParameter param;
  ToProto(q, &param);
  EXPECT_EQ(param.name(), "conv1");
  EXPECT_EQ(param.zone(), 2);
  EXPECT_EQ(param.mode(), caffe::CAFFE_QUANT_OBSERVE);
  EXPECT_EQ(param.output_data_type(), caffe::CAFFE_INT8_QUANTIZED);
  EXPECT_EQ(param.observed_min(), -3.5);
  EXPECT_EQ(param.observed_max(), 9.0);
  EXPECT_FALSE(param.has_min_in());
  EXPECT_EQ(param.min_out(), -1.5);

  // Through the wire format and back into a fresh quantizer.
  caffe::QuantizerParameter loaded;
  ASSERT_TRUE(loaded.ParseFromString(param.SerializeAsString()));
  Quantizer r(d, "conv1", 2);
  FromProto(loaded, &r);
  EXPECT_EQ(r.mode(), QuantizerMode::kObserve);
  EXPECT_EQ(r.output_type(), DataType::kInt8Q);
  EXPECT_EQ(r.pseudo_target_type(), DataType::kInt16Q);
  EXPECT_TRUE(r.pseudo_reset_observed());
  EXPECT_EQ(r.observed_min(), -3.5);
  EXPECT_EQ(r.observed_max(), 9.0);
  EXPECT_FALSE(r.has_input_range());
  EXPECT_EQ(r.OutputParams().scale[0], q.OutputParams().scale[0]);
  EXPECT_EQ(r.ObservedParams(DataType::kInt8Q).zero_point[0],
            q.ObservedParams(DataType::kInt8Q).zero_point[0]);
}

TEST(QuantizerProto, TextFormatAndUnsupportedTypes) {
  caffe::QuantizerParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "name: 'ip1' mode: CAFFE_QUANT_PSEUDO pseudo_target_type: CAFFE_HALF "
      "observed_min: -2 observed_max: 3",
      &param));
  Quantizer q(DefaultDevice(), "ip1");
  FromProto(param, &q);
  EXPECT_EQ(q.mode(), QuantizerMode::kPseudo);
  EXPECT_EQ(q.pseudo_target_type(), DataType::kFloat16);
  EXPECT_EQ(q.observed_min(), -2.0);
  EXPECT_EQ(q.observed_max(), 3.0);

  // No observed range in the parameter: the quantizer forgets what it had.
  param.clear_observed_min();
  param.clear_observed_max();
  FromProto(param, &q);
  EXPECT_FALSE(q.has_observed());

  param.set_output_data_type(caffe::CAFFE_DOUBLE);
  EXPECT_THROW(FromProto(param, &q), Error);
  EXPECT_EQ(FromProtoDataType(caffe::CAFFE_INT16_QUANTIZED, "x"), DataType::kInt16Q);
  for (DataType t : kAllDataTypes) EXPECT_EQ(FromProtoDataType(ToProtoDataType(t), "x"), t);
  // The one mapping, inverted: the layers' DataTypeFromProto/ToProto use it too.
  EXPECT_FALSE(DataTypeOfProto(caffe::CAFFE_DOUBLE).has_value());
  EXPECT_EQ(UnsupportedProtoDataType(caffe::CAFFE_DOUBLE),
            "data type CAFFE_DOUBLE is not one mpcaffe computes in (CAFFE_FLOAT, CAFFE_HALF, "
            "CAFFE_INT16_QUANTIZED, CAFFE_INT8_QUANTIZED)");
}

}  // namespace
}  // namespace mpcaffe::quant
namespace mpcaffe::quant {
namespace {

TEST(QuantizerProto, EveryModeRoundTrips) {
  for (QuantizerMode mode : {QuantizerMode::kPassive, QuantizerMode::kObserve,
                             QuantizerMode::kPseudo, QuantizerMode::kActive}) {
    Quantizer q(DefaultDevice(), "q", 0);
    q.set_mode(mode);
    caffe::QuantizerParameter param;
    ToProto(q, &param);
    Quantizer r(DefaultDevice(), "r", 0);
    FromProto(param, &r);
    EXPECT_EQ(r.mode(), mode) << QuantizerModeName(mode);
  }
}

}  // namespace
}  // namespace mpcaffe::quant

#endif
