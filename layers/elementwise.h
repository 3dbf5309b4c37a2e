// layers/elementwise.h — element-wise operations (ReLU, scale, axpby, data-type conversion) on
// a device for every data type, and their plain C++ references with the same contract.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "codegen/datatype.h"
#include "device/device.h"

namespace mpcaffe {

/// The affine quantization of one operand: real = scale · (q − zero_point). Ignored for float
/// types.
struct Affine {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

/// Launches the element-wise kernels of codegen/elementwise.h on one device. Buffers hold
/// `n` elements of the data type's storage (see TraitsOf(type).storage). Programs come from
/// Device::GetProgram (built once per device).
class ElementwiseOps {
 public:
  explicit ElementwiseOps(Device& device) : device_(device) {}

  /// y = max(x, 0) + slope·min(x, 0). Quantized: slope must be >= 0.
  void Relu(DataType type, int n, DeviceMemory& x, DeviceMemory& y, float slope = 0.0f,
            Affine xq = {}, Affine yq = {});
  /// y = alpha·x.
  void Scale(DataType type, int n, float alpha, DeviceMemory& x, DeviceMemory& y, Affine xq = {},
             Affine yq = {});
  /// y = a·x + b·y (y keeps its quantization).
  void Axpby(DataType type, int n, float a, DeviceMemory& x, float b, DeviceMemory& y,
             Affine xq = {}, Affine yq = {});
  /// y = x converted from `from` to `to`.
  void Convert(DataType from, DataType to, int n, DeviceMemory& x, DeviceMemory& y,
               Affine xq = {}, Affine yq = {});

  Device& device() const { return device_; }

 private:
  /// The kernel `name` (its program's text from `source` on the first call): the layers run
  /// these on every pass, and writing a kernel's text costs more than launching it.
  Kernel& Get(const std::string& name, const std::function<std::string()>& source);
  Device& device_;
  std::map<std::string, Kernel> kernels_;
};

/// Plain C++ references: the same arithmetic on host storage (x and y point at `n` storage
/// elements of the given types).
namespace reference {
void Relu(DataType type, int n, const void* x, void* y, float slope, Affine xq, Affine yq);
void Scale(DataType type, int n, float alpha, const void* x, void* y, Affine xq, Affine yq);
void Axpby(DataType type, int n, float a, const void* x, float b, void* y, Affine xq, Affine yq);
void Convert(DataType from, DataType to, int n, const void* x, void* y, Affine xq, Affine yq);
}  // namespace reference

}  // namespace mpcaffe
