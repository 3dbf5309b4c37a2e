// codegen/target_profile.h — what libdnn's choosers may ask of a device instead of its backend:
// how its compiler schedules work-items, which vendor GEMM library serves it, which kernel
// families were checked on it. Built from DeviceInfo (device/ fills that from the driver); the
// kernel texts' own capabilities are KernelTarget's (codegen/kernel_writer.h).
#pragma once

#include "device/device.h"

namespace mpcaffe {

/// The vendor GEMM library the BLAS multiplexer (libdnn/blas.h) may offer beside the generated
/// kernels on a device.
enum class VendorBlas { kCLBlast, kCuBLAS };

/// Scheduling class, library and family capabilities of one device, as fields.
struct TargetProfile {
  /// Work-items map to SIMD lanes (GPUs, llvmpipe): DeviceInfo's UsesLaneDefaults.
  bool lane_defaults = false;
  /// An OpenCL CPU runtime running a work-item per thread on the kernel's own vectors (PoCL,
  /// Intel's CPU runtime): UsesCpuVectorDefaults.
  bool cpu_vectors = false;
  /// Per-lane loads cost far more than one address for every lane (DeviceInfo's field).
  bool lane_loads_expensive = false;
  /// A native 4-way int8 dot product (DeviceInfo::dot_product).
  bool dot_product = false;
  /// The compiler makes byte pair products one instruction (DeviceInfo::byte_pair_products):
  /// where it does not, 4-bit weights keep their own GEMM only where they dominate the bytes.
  bool byte_pair_products = true;
  /// AVX-512 VNNI's byte quad products run in a helper function (ByteQuadsInHelper: PoCL on a
  /// CPU with avx512vnni, MPCAFFE_ISA not lowered): the int8 pointwise kernel's 4-channel steps.
  bool byte_quad_products = false;
  /// AMX's byte tile products run in a helper function (ByteTilesInHelper: PoCL on a CPU with
  /// AMX-INT8 whose tiles this process may use): the int8 direct convolution's tile form.
  bool byte_tile_products = false;
  /// Register tiles of at most half the vector register file: a CPU runtime at a level of 16
  /// 256-bit registers (the host level in use below AVX-512: an AVX2 CPU, or MPCAFFE_ISA=avx2,
  /// which caps the runtimes' compilers too), where a tile of 16 two-register accumulators
  /// spills.
  bool half_register_tiles = false;
  /// Vectors of 16 floats are whole registers the compiler keeps: a CPU runtime at the AVX-512
  /// level without DeviceInfo::wide_tiles_slow_at_256_bits (PoCL; Intel's runtime splits
  /// 512-bit work into 256-bit halves). The direct kernel's fp32 tile of 16-channel vectors.
  bool sixteen_lane_registers = false;
  /// fp16 arithmetic in half (DeviceInfo::fp16: cl_khr_fp16, CUDA); without it fp16 is half
  /// storage converted to float around each operation (PoCL).
  bool half_arithmetic = false;
  /// The kernel text's $prefetch fetches (DeviceInfo::software_prefetch): PoCL and Intel's CPU
  /// runtime.
  bool software_prefetch = false;
  /// 16 stride-2 byte columns per vector cost more than 8 (DeviceInfo::strided_byte_rows_slow).
  bool strided_byte_rows_slow = false;
  /// A row reduced by a work-group in local memory beats a work-item per row where the rows
  /// are few (every device but PoCL's CPU device: DeviceInfo::group_reductions_slow): the
  /// Softmax layer's form for a classifier's rows.
  bool group_reductions = true;
  /// The Winograd convolution (libdnn's "conv_wino", three launches per layer) may be a default:
  /// the CPU runtimes (their work-group queues take the extra launches; devices of lanes are not
  /// measured).
  bool winograd_launches = false;
  /// The dialect has OpenCL C's vector types and built-ins (Dialect::vector_builtins): the
  /// vector forms of libdnn's kernels exist only then.
  bool vector_builtins = true;
  /// CLBlast on OpenCL devices, cuBLAS on CUDA devices.
  VendorBlas vendor_blas = VendorBlas::kCLBlast;
  /// The im2col + LibDNN GEMM forward convolution (libdnn's "conv_gemm" family) is offered:
  /// on OpenCL, where it was checked against the reference and measured; not on CUDA, where no
  /// device has run it (the build machine has no GPU), so CUDA convolutions keep their kernels.
  bool conv_gemm = true;

  static TargetProfile Of(const DeviceInfo& info);
};

}  // namespace mpcaffe
