// mpcaffe/mpcaffe.h — the library's public interface in one include, for programs built against
// an installed mpcaffe (find_package(mpcaffe) or pkg-config): device selection, Net and Blob,
// the solvers, data types and quantizer modes, the error classes, model-file reading and the
// version. These headers (and proto/caffe.pb.h) are all `cmake --install` ships: the layers,
// quantizers, kernels and backends stay private (Net::layers() holds Layers the public headers
// only declare; a layer's definition is in built_param()).
#pragma once

#include "codegen/datatype.h"  // DataType {kFloat32, kFloat16, kInt16Q, kInt8Q}, ParseDataType
#include "device/device.h"     // Device, DeviceList, DefaultDevice, SelectDevice, DeviceOrDefault
#include "device/error.h"      // Error, DeviceError, BuildError, ...
#include "layers/blob.h"       // Blob: shape, data type, ToFloat / FromFloat
#include "layers/image_io.h"   // ReadImage (OpenCV's decoding through the codec plugin), Image
#include "mpcaffe/version.h"   // MPCAFFE_VERSION
#include "net/net.h"           // Net, NetOptions, CalibrateWithFloatVariant, NetError
#include "net/solver.h"        // Solver::FromFile (SGD, Nesterov, Adam, ...), SolverError
#include "proto/model_io.h"    // ReadNetParameterText / Binary, ModelFileError
#include "quant/quantizer_mode.h"  // quant::QuantizerMode {kPassive, kObserve, kPseudo, kActive}
