// tools/cmd_devices.cc — `mpcaffe devices [--json] [--verbose]`: every device of every backend.
#include <cstdio>
#include <sstream>

#include "device/device.h"
#include "layers/image_io.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

const char* YesNo(bool b) { return b ? "yes" : "no"; }

int RunDevices(const std::vector<std::string>& args) {
  const bool json = HasFlag(args, "--json");
  const bool verbose = HasFlag(args, "--verbose") || HasFlag(args, "-v");
  // The image codec before the devices, as in a program that reads a picture before it picks a
  // device: loading OpenCV must leave every driver loadable (layers/image_codec.h).
  std::string images;
  if (verbose) {
    try {
      images = ImageCodecDescription();
    } catch (const Error& e) {
      images = std::string("cannot be decoded: ") + e.what();
    }
  }
  const auto& devices = DeviceList();
  if (devices.empty()) {
    std::fprintf(stderr,
                 "mpcaffe: no compute device found.\n"
                 "Install an OpenCL driver — on Debian/Ubuntu: apt-get install pocl-opencl-icd "
                 "(runs on the CPU) — or a GPU vendor's OpenCL/CUDA driver.\n");
    for (const auto& line : BackendReports()) std::fprintf(stderr, "  %s\n", line.c_str());
    if (json) std::printf("[]\n");
    return 1;
  }
  if (json) {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < devices.size(); ++i) {
      const DeviceInfo& d = devices[i]->info();
      os << (i ? ",\n " : "\n ") << "{\"index\": " << devices[i]->index() << ", \"backend\": \""
         << BackendName(d.backend) << "\", \"implementation\": \"" << JsonEscape(d.implementation)
         << "\", \"platform\": \"" << JsonEscape(d.platform_name) << "\", \"name\": \"" << JsonEscape(d.name)
         << "\", \"vendor\": \"" << JsonEscape(d.vendor) << "\", \"driver\": \""
         << JsonEscape(d.driver_version) << "\", \"global_mem_bytes\": " << d.global_mem_bytes
         << ", \"compute_units\": " << d.compute_units << ", \"fp16\": " << (d.fp16 ? "true" : "false")
         << ", \"int64\": " << (d.int64 ? "true" : "false")
         << ", \"dot_product\": " << (d.dot_product ? "true" : "false") << "}";
    }
    os << "\n]\n";
    std::fputs(os.str().c_str(), stdout);
    return 0;
  }
  std::printf("%-5s %-7s %-9s %-34s %-16s %-12s %10s %5s %5s %5s %4s\n", "index", "backend",
              "impl", "name", "vendor", "driver", "memory", "units", "fp16", "int64", "dp4a");
  for (Device* dev : devices) {
    const DeviceInfo& d = dev->info();
    std::printf("%-5d %-7s %-9s %-34s %-16s %-12s %7.1f GiB %5d %5s %5s %4s\n", dev->index(),
                BackendName(d.backend), d.implementation.substr(0, 9).c_str(),
                d.name.substr(0, 34).c_str(), d.vendor.substr(0, 16).c_str(),
                d.driver_version.substr(0, 12).c_str(), d.global_mem_bytes / 1073741824.0,
                d.compute_units, YesNo(d.fp16), YesNo(d.int64), YesNo(d.dot_product));
    if (verbose)
      std::printf("      platform: %s (%s); %s; local memory %llu bytes; max work-group %zu\n",
                  d.platform_name.c_str(), d.platform_version.c_str(), d.arch.c_str(),
                  static_cast<unsigned long long>(d.local_mem_bytes), d.max_work_group_size);
  }
  if (verbose) {
    std::printf("\nbackends:\n");
    for (const auto& line : BackendReports()) std::printf("  %s\n", line.c_str());
    std::printf("images: %s\n", images.c_str());
  }
  std::printf("default device: %d\n", DefaultDevice().index());
  return 0;
}

RegisterCommand devices_command(
    "devices", "list every OpenCL and CUDA device (--json, --verbose)",
    "usage: mpcaffe devices [--json] [--verbose|-v]\n"
    "  --json     one JSON object per device\n"
    "  --verbose  each device's platform, architecture, local memory and work-group size, and\n"
    "             what each backend found (why one has no device), and the image codec\n",
    {{}, {"--json", "--verbose", "-v"}}, RunDevices);

}  // namespace
}  // namespace mpcaffe::tools
