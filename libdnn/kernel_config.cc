// libdnn/kernel_config.cc — "family:config" split, and the MPCAFFE_KERNEL_CONFIG override read.
#include "libdnn/kernel_config.h"

#include <algorithm>

#include "device/settings.h"

namespace mpcaffe::libdnn {

const std::vector<std::string>& ConfigurableFamilies() {
  static const std::vector<std::string> families{"gemm", "conv", "conv_dw", "conv_pw"};
  return families;
}

const char* ConfigSourceName(ConfigSource source) {
  switch (source) {
    case ConfigSource::kTuned: return "tuned";
    case ConfigSource::kOverride: return "override";
    case ConfigSource::kDefault: break;
  }
  return "default";
}

std::optional<KernelConfigText> SplitKernelConfig(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
  return KernelConfigText{text.substr(0, colon), text.substr(colon + 1)};
}

std::optional<KernelConfigText> KernelConfigOverride(const std::string& family) {
  const std::string& setting = GetSettings().kernel_config;
  std::optional<KernelConfigText> found;
  size_t start = 0;
  while (start < setting.size()) {
    size_t end = setting.find(';', start);
    if (end == std::string::npos) end = setting.size();
    std::string entry = setting.substr(start, end - start);
    start = end + 1;
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    if (entry.empty()) continue;
    const std::optional<KernelConfigText> e = SplitKernelConfig(entry);
    const auto& known = ConfigurableFamilies();
    if (!e || std::find(known.begin(), known.end(), e->family) == known.end()) {
      std::string names;
      for (const auto& f : known) names += (names.empty() ? "" : ", ") + f;
      throw Error("MPCAFFE_KERNEL_CONFIG=" + setting + ": entry '" + entry +
                  "': expected family:config with a family of " + names);
    }
    if (e->family == family) found = e;  // the last entry of a family counts
  }
  return found;
}

}  // namespace mpcaffe::libdnn
