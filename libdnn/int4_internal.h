// libdnn/int4_internal.h — what the GEMM and the convolution share for 4-bit weights (int8w4):
// the descriptions' checks and the device kernel that unpacks packed nibbles to int8.
#pragma once

#include <string>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/gemm.h"

namespace mpcaffe::libdnn::int4 {

/// Throws mpcaffe::Error (through the description's own message) when GemmDesc::weight_bits is
/// neither 8 nor 4, or 4 with a type, signedness, zero point or layout it does not support.
void ValidateWeightBits(const GemmDesc& d);

/// Adds the unpack kernel (below) to a program.
void AddUnpackKernel(KernelWriter& w);
/// Name of the unpack kernel of UnpackSource.
inline const char* UnpackKernelName() { return "int4_unpack"; }
/// The unpack kernel: int4_unpack(mp_u8* packed, mp_i8* out, int channels, int K) writes the
/// channels × K sign-extended weights of channels packed rows (quant/int4.h), launched with
/// Kernel::Launch1D over channels · ceil(K/2) bytes.
std::string UnpackSource(const KernelTarget& target);
/// Sets the unpack kernel's arguments and launches it: `packed` rows to `out` (channels × K
/// int8 at byte 0 of `out`).
Event Unpack(Kernel& kernel, const BufferRef& packed, DeviceMemory* out, int channels, int k,
             Queue* queue);

/// Whether `c` runs the native 4-bit kernels (GemmConfig::kU8S4) rather than the int8 kernels
/// on unpacked weights.
inline bool Native(const GemmDesc& d, const GemmConfig& c) {
  return d.weight_bits == 4 && c.kp == GemmConfig::kU8S4;
}
/// The native program: the GEMM kernel (Gemm::KernelName, the int8 kernel's arguments followed
/// by `xq`, the packed activations), its activation pack kernel (KernelName + "_xpack") and the
/// weight sums (KernelName + "_wsum", Σ of the nibbles per channel).
std::string NativeSource(const KernelTarget& target, const GemmDesc& d, const GemmConfig& c);
/// Bytes of the packed activations of one run.
size_t PackedActivationBytes(const GemmDesc& d, const GemmConfig& c);
/// Launches the activation pack kernel of one run (A or B, whichever holds the activations).
Event PackActivations(Kernel& xpack, const GemmDesc& d, const GemmConfig& c, const GemmArgs& args,
                      DeviceMemory* xq, Queue* queue);

}  // namespace mpcaffe::libdnn::int4
