// libdnn/kernel_config.cc — "family:config" split, and the MPCAFFE_KERNEL_CONFIG override read.
#include "libdnn/kernel_config.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "device/settings.h"
#include "libdnn/kernel_families.h"

namespace mpcaffe::libdnn {

namespace {

struct ChoiceLog {
  std::mutex mutex;
  std::atomic<bool> active{false};
  std::vector<KernelChoice> choices;
};

ChoiceLog& TheChoiceLog() {
  static ChoiceLog log;
  return log;
}

}  // namespace

KernelChoiceLog::KernelChoiceLog() {
  ChoiceLog& log = TheChoiceLog();
  std::lock_guard<std::mutex> lock(log.mutex);
  if (log.active) throw Error("KernelChoiceLog: another log is alive");
  log.choices.clear();
  log.active = true;
}

KernelChoiceLog::~KernelChoiceLog() {
  ChoiceLog& log = TheChoiceLog();
  std::lock_guard<std::mutex> lock(log.mutex);
  log.active = false;
  log.choices.clear();
}

std::vector<KernelChoice> KernelChoiceLog::Take() {
  ChoiceLog& log = TheChoiceLog();
  std::lock_guard<std::mutex> lock(log.mutex);
  std::vector<KernelChoice> out;
  out.swap(log.choices);
  return out;
}

bool KernelChoiceLogActive() { return TheChoiceLog().active; }

void NoteKernelChoice(KernelChoice choice) {
  ChoiceLog& log = TheChoiceLog();
  std::lock_guard<std::mutex> lock(log.mutex);
  if (log.active) log.choices.push_back(std::move(choice));
}

namespace {

/// The choice names of the registry's families (all, or only the configurable ones), in its
/// order.
std::vector<std::string> ChoiceNames(bool configurable_only) {
  std::vector<std::string> names;
  for (const KernelFamilyEntry& family : KernelFamilyRegistry())
    for (const KernelChoiceName& choice : family.choices)
      if (choice.configurable() || !configurable_only) names.push_back(choice.name);
  return names;
}

}  // namespace

const std::vector<std::string>& ConfigurableFamilies() {
  static const std::vector<std::string> families = ChoiceNames(true);
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

const std::vector<std::string>& KernelFamilies() {
  static const std::vector<std::string> families = ChoiceNames(false);
  return families;
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
