// codegen/target_profile.cc — TargetProfile from a device's DeviceInfo: the one place the
// backend decides libdnn's library and family choices.
#include "codegen/target_profile.h"

#include "codegen/kernel_writer.h"
#include "device/host_isa.h"

namespace mpcaffe {

TargetProfile TargetProfile::Of(const DeviceInfo& info) {
  TargetProfile p;
  p.lane_defaults = UsesLaneDefaults(info);
  p.cpu_vectors = UsesCpuVectorDefaults(info);
  p.lane_loads_expensive = info.lane_loads_expensive;
  p.dot_product = info.dot_product;
  p.byte_pair_products = info.byte_pair_products;
  p.byte_quad_products = ByteQuadsInHelper(info);
  p.byte_tile_products = ByteTilesInHelper(info);
  p.half_register_tiles = p.cpu_vectors && ActiveHostIsa() < HostIsa::kAvx512;
  p.sixteen_lane_registers = p.cpu_vectors && !info.wide_tiles_slow_at_256_bits &&
                             ActiveHostIsa() >= HostIsa::kAvx512;
  p.half_arithmetic = info.fp16;
  p.strided_byte_rows_slow = info.strided_byte_rows_slow;
  p.group_reductions = !info.group_reductions_slow;
  p.software_prefetch = info.software_prefetch;
  p.winograd_launches = p.cpu_vectors;
  p.vector_builtins = Dialect::For(info.backend).vector_builtins;
  switch (info.backend) {
    case Backend::kOpenCL:
      p.vendor_blas = VendorBlas::kCLBlast;
      p.conv_gemm = true;
      break;
    case Backend::kCuda:
      p.vendor_blas = VendorBlas::kCuBLAS;
      p.conv_gemm = false;
      break;
  }
  return p;
}

}  // namespace mpcaffe
