// device/error.h — the exceptions the device layer throws: every message names the API call,
// the device and what went wrong.
#pragma once

#include <stdexcept>
#include <string>

namespace mpcaffe {

/// Base of every mpcaffe error.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A driver call failed, e.g. "clEnqueueNDRangeKernel: CL_INVALID_WORK_GROUP_SIZE".
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// A device could not provide the memory asked for.
class OutOfMemoryError : public DeviceError {
 public:
  using DeviceError::DeviceError;
};

/// A kernel failed to compile. what() carries the device, options, driver log and the
/// numbered source lines around the first error.
class BuildError : public DeviceError {
 public:
  BuildError(const std::string& message, std::string log)
      : DeviceError(message), log_(std::move(log)) {}
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

/// Formats a build failure: device, options, log, and the source lines around the first line
/// the log points at (or the first lines of the source when it points at none).
std::string FormatBuildFailure(const std::string& what, const std::string& device,
                               const std::string& options, const std::string& log,
                               const std::string& source);

}  // namespace mpcaffe
