// net/device_choice.h — which device runs a net when the user names none: the device with the
// fastest recorded forward pass of that very net (the tuning table's "net" records, written by
// `mpcaffe time` and `mpcaffe bench net`), else the profile rule (DevicesByProfile).
#pragma once

#include <string>

#include "device/device.h"
#include "proto/caffe.pb.h"

namespace mpcaffe {

/// The device a net runs on, and why it was chosen (printed by the tools).
struct DeviceChoice {
  Device* device = nullptr;
  std::string why;
};

/// The signature of a net's "net" records: the SHA-256 of the NetParameter as given (its
/// layers, data types and input shapes, so a batch or data type of its own is another net).
std::string NetRecordSignature(const caffe::NetParameter& param);

/// Whether any layer (or the net's own data_type) computes in fp16, and in int8.
NetTypes NetComputeTypes(const caffe::NetParameter& param);

/// Stores the median forward-pass time of `param` on `device` as its "net" record (no-op
/// without an active kernel cache). Returns whether a record was written.
bool RecordNetForward(const Device& device, const caffe::NetParameter& param, double ms);

/// `selector`'s device when one is given; else MPCAFFE_DEVICE's or the MPI rank's
/// (DefaultDevice); else, when two or more devices hold a "net" record of this net, the one
/// with the shortest; else the first of DevicesByProfile for the net's NetComputeTypes.
DeviceChoice ChooseDeviceForNet(const std::string& selector, const caffe::NetParameter& param);

}  // namespace mpcaffe
