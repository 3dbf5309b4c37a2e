// libdnn/pool_internal.h — pooling's vector max kernels kept beside pool.cc: the row form
// (pool_row.cc), the plane form of the 3×3 stride-1 max pool that keeps its plane's size and the
// column walk (pool_plane.cc).
#pragma once

#include <string>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "libdnn/pool.h"

namespace mpcaffe::libdnn::pool_internal {

/// Adds the row form's kernel "<ForwardKernelName(type, max)>_v<L>" to the max pool's program
/// `w` (Pooling::ForwardSource: Dtype and the requantization declared).
void DeclareVectorMax(KernelWriter& w, DataType type, int L);

/// The plane form's lanes: 16 neighbouring outputs of the flattened plane.
constexpr int kPlaneLanes = 16;

/// Whether the plane form computes `d`: int8q, int16q or fp32 max pooling, a 3×3 window, stride
/// 1, padding 1 (the output plane the input's size: GoogLeNet's inception pools), planes of at
/// least kPlaneLanes elements.
bool PlaneMaxApplies(const PoolDesc& d);

/// "<ForwardKernelName(type, max)>_plane".
std::string PlaneMaxKernelName(DataType type);

/// Adds the plane form's kernel for `type` (int8q, int16q or fp32) to the max pool's program
/// `w`, whose Dtype and requantization Pooling::ForwardSource has declared.
void DeclarePlaneMax(KernelWriter& w, DataType type);

/// The column walk's lanes: neighbouring outputs of a row, 16 for int8q, 8 for fp32.
int WalkLanes(DataType type);

/// Whether the column walk computes `d`: int8q or fp32 max pooling, a 2×2 or 3×3 window at stride
/// 1 or 2 (padding below the window, as Caffe requires).
bool WalkMaxApplies(const PoolDesc& d);

/// "<ForwardKernelName(type, max)>_walk<stride>".
std::string WalkMaxKernelName(DataType type, int stride);

/// Adds the column walk's kernel for `type` (int8q, fp32) and `stride` (1 or 2) to the max pool's
/// program `w`: <WalkMaxKernelName>(In Dtype x, Out Dtype y, int planes, H, W, OH, OW, K, ph,
/// pw, x_zero, y_zero, same, mult, shift, elements), work-item (v, ·) the output columns
/// WalkLanes·v … of every plane its group walks ($group_id(1), step $num_groups(1)).
void DeclareWalkMax(KernelWriter& w, DataType type, int stride);

/// Whether the whole-plane average form computes `d`: int8q, int16q or fp32 average pooling whose
/// window is the whole input plane without padding (global pooling, or a kernel the plane's size:
/// the classifiers' last pools), planes of fewer than 2^15 values (int32 sums of 16-bit codes).
bool PlaneAveApplies(const PoolDesc& d);

/// "<ForwardKernelName(type, ave)>_plane".
std::string PlaneAveKernelName(DataType type);

/// Adds the whole-plane average kernel for `type` to the average pool's program `w`:
/// <PlaneAveKernelName>(In Dtype x, Out Dtype y, In int rq, int planes, int hw, int x_zero,
/// int y_zero), each work-item a contiguous range of planes ($vector_loop), a plane summed in
/// vectors of 8 and its hw % 8 tail; the scalar kernel's divisor (fp32: the sum / hw) and
/// requantization (rq's row for hw values), the codes' sums exact.
void DeclarePlaneAve(KernelWriter& w, DataType type);

}  // namespace mpcaffe::libdnn::pool_internal
