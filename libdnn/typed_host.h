// libdnn/typed_host.h — private helpers shared by the convolution, pooling and LRN sources:
// host access to typed storage for the references and the requantization a type's accumulator
// uses (the kernels' MP_REQUANT is KernelWriter::UseRequant).
#pragma once

#include <cstdint>
#include <string>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "codegen/typed_buffer.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe::libdnn::host {

/// Element access to typed storage: the one accessor of codegen/typed_buffer.h.
using mpcaffe::LoadF;
using mpcaffe::LoadQ;
using mpcaffe::StoreF;
using mpcaffe::StoreQ;

/// The requantization of a type's accumulator (the kernels' MP_REQUANT).
using quant::Requant;

/// "what: field = value must be ..." error text helper.
inline std::string Field(const std::string& name, long long value) {
  return name + " = " + std::to_string(value);
}

}  // namespace mpcaffe::libdnn::host
