// tools/cmd_convert.cc — `mpcaffe convert --model fp32.prototxt --dtype fp16|int16|int8|int8w4
// --output typed.prototxt`: writes the typed variant of a net definition, the rewrite
// `bench net` measures (tools/net_variants.h: every layer that can compute in the type does,
// input layers and layers that cannot stay fp32, the net inserts the conversions).
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "google/protobuf/text_format.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/net_variants.h"

namespace mpcaffe::tools {
namespace {

constexpr char kUsage[] =
    "usage: mpcaffe convert --model fp32.prototxt --dtype fp16|int16|int8|int8w4\n"
    "                       [--output typed.prototxt] (default: standard output)\n"
    "                       [--device i] (asked which layers compute in the type)\n";

int Usage(const std::string& why) { return UsageError("convert", why); }

int RunConvert(const std::vector<std::string>& args) {
  const std::string model = FlagValue(args, "--model");
  const std::string dtype_flag = FlagValue(args, "--dtype");
  const std::string output = FlagValue(args, "--output");
  if (model.empty()) return Usage("--model is required");
  if (dtype_flag.empty()) return Usage("--dtype is required");
  NetDtype dtype;
  try {
    dtype = ParseNetDtype(dtype_flag);
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  try {
    const caffe::NetParameter param = ReadNetParameterText(model);
    Device& device = DeviceOrDefault(FlagValue(args, "--device"));
    const caffe::NetParameter typed = TypedVariant(param, dtype, device);
    int kept = 0;
    std::string kept_names;
    for (const auto& l : typed.layer())
      if (!IsInputLayerType(l.type()) && l.compute_data_type() != DataTypeToProto(dtype.type)) {
        ++kept;
        kept_names += (kept_names.empty() ? "" : ", ") + l.name() + " (" + l.type() + ")";
      }
    if (output.empty()) {
      std::string text;
      google::protobuf::TextFormat::PrintToString(typed, &text);
      std::cout << text;
    } else {
      WriteProtoToTextFile(typed, output);
      std::fprintf(stderr, "Wrote %s: %s", output.c_str(), NetDtypeLabel(dtype).c_str());
      if (kept) std::fprintf(stderr, ", fp32 kept in %s", kept_names.c_str());
      std::fprintf(stderr, "\n");
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe convert: %s\n", e.what());
    return 1;
  }
}

RegisterCommand convert_command(
    "convert", "write the typed variant of an fp32 prototxt: --model m --dtype int8 --output t",
    kUsage, {{"--model", "--dtype", "--output", "--device"}, {}}, RunConvert);

}  // namespace
}  // namespace mpcaffe::tools
