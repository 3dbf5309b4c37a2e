// tools/bench_net.h — what the bench and tune commands share (defined in tools/cmd_bench_net.cc):
// the device list a `--device` flag names and the device identity keys of their JSON.
#pragma once

#include <string>
#include <vector>

#include "device/device.h"

namespace mpcaffe::tools {

/// The devices a bench command runs on, in turn: "" the default device, "all" every device
/// (DeviceList() order: OpenCL platforms, then CUDA), "i,j" those indices. Throws on an unknown
/// index or when no device exists.
std::vector<Device*> BenchDevices(const std::string& flag);

/// The JSON members naming `device` (no braces): "device" (its name), "device_index",
/// "backend", "platform", "platform_version", "driver_version" and "fp16" (whether half
/// arithmetic runs on it), each result object of the bench commands carries them.
std::string DeviceIdentityJson(const Device& device);

}  // namespace mpcaffe::tools
