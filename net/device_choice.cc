// net/device_choice.cc — the default device of a net: measured passes first, the profile rule
// second (net/device_choice.h).
#include "net/device_choice.h"

#include <cstdio>

#include "cache/program_cache.h"
#include "cache/sha256.h"
#include "device/settings.h"

namespace mpcaffe {

namespace {

constexpr const char* kNetOperation = "net";

std::string Milliseconds(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", ms);
  return buf;
}

}  // namespace

std::string NetRecordSignature(const caffe::NetParameter& param) {
  std::string bytes;
  // Deterministic: equal messages give equal bytes within one build of the protobuf library,
  // which is what the records of one tuning table are compared under.
  param.SerializeToString(&bytes);
  return cache::Sha256Hex(bytes);
}

NetTypes NetComputeTypes(const caffe::NetParameter& param) {
  NetTypes t;
  const auto note = [&t](caffe::DataType type) {
    t.fp16 |= type == caffe::CAFFE_HALF;
    t.int8 |= type == caffe::CAFFE_INT8_QUANTIZED;
  };
  note(param.data_type());
  for (const caffe::LayerParameter& l : param.layer()) note(l.compute_data_type());
  return t;
}

bool RecordNetForward(const Device& device, const caffe::NetParameter& param, double ms) {
  auto store = cache::ActiveProgramCache();
  if (!store || !(ms > 0)) return false;
  cache::TuningRecord r;
  r.device = cache::TuningDeviceKey(device.info());
  r.operation = kNetOperation;
  r.signature = NetRecordSignature(param);
  // The shortest pass seen: a pass on a loaded machine only takes longer, and the records go
  // with the library version that measured them (the table's version check).
  if (const auto old = store->GetTuning(r.device, r.operation, r.signature); old && old->time_ms <= ms)
    return false;
  r.parameters = "forward";
  r.time_ms = ms;
  return store->PutTuning(r);
}

DeviceChoice ChooseDeviceForNet(const std::string& selector, const caffe::NetParameter& param) {
  if (!selector.empty()) return {&SelectDevice(selector), "--device " + selector};
  if (DefaultDeviceIsAssigned())
    return {&DefaultDevice(), GetSettings().device.empty() ? "the MPI rank's device"
                                                           : "MPCAFFE_DEVICE=" + GetSettings().device};
  if (auto store = cache::ActiveProgramCache()) {
    const std::string signature = NetRecordSignature(param);
    Device* best = nullptr;
    double best_ms = 0;
    int recorded = 0;
    std::string others;
    for (Device* d : DeviceList()) {
      const auto rec = store->GetTuning(cache::TuningDeviceKey(d->info()), kNetOperation, signature);
      if (!rec) continue;
      ++recorded;
      if (!best || rec->time_ms < best_ms) {
        if (best) others += (others.empty() ? "" : ", ") + Milliseconds(best_ms) + " on " +
                            std::to_string(best->index());
        best = d;
        best_ms = rec->time_ms;
      } else {
        others += (others.empty() ? "" : ", ") + Milliseconds(rec->time_ms) + " on " +
                  std::to_string(d->index());
      }
    }
    if (recorded >= 2)
      return {best, "the fastest recorded forward pass of this net: " + Milliseconds(best_ms) +
                        " against " + others};
  }
  const NetTypes types = NetComputeTypes(param);
  Device* d = DevicesByProfile(types).front();
  const bool quads = types.int8 && ByteQuadsInHelper(d->info());
  bool passed_slow = false;  // a device of the class ranked after it for its slow passes
  for (const Device* other : DeviceList())
    passed_slow |= other != d && SlowNetPasses(other->info(), types) &&
                   !SlowNetPasses(d->info(), types) &&
                   other->info().is_gpu == d->info().is_gpu;
  return {d, std::string("the profile rule: ") + (d->info().is_gpu ? "a GPU" : "a CPU device") +
                 (types.fp16 ? ", native fp16 for an fp16 net" : "") +
                 (quads ? ", byte quad products for an int8 net" : "") +
                 (passed_slow ? ", ahead of a runtime whose net passes measured slower" : "") +
                 "; no passes of this net recorded on two devices"};
}

}  // namespace mpcaffe
