// cache/default_cache.cc — the process's default kernel cache: its path (MPCAFFE_CACHE,
// XDG_CACHE_HOME, HOME through Settings) and the one ProgramCache installed as the program
// binary store.
#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <mutex>

#include "cache/program_cache.h"
#include "device/settings.h"

namespace mpcaffe::cache {

// ---------------------------------------------------------------------------------------------
// The default cache.

std::string DefaultCachePath(std::string* why) {
  auto said = [&](const char* reason) {
    if (why) *why = reason;
  };
  const Settings& settings = GetSettings();
  if (!settings.cache.empty()) {
    const std::string& value = settings.cache;
    std::string lower;
    for (char c : value) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    said("MPCAFFE_CACHE");
    return lower == "off" ? std::string() : value;
  }
  const std::string& xdg = settings.xdg_cache_home;
  if (!xdg.empty() && xdg[0] == '/') {  // the XDG spec ignores relative paths
    said("XDG_CACHE_HOME");
    return xdg + "/mpcaffe/kernels.sqlite";
  }
  std::string home = settings.home;
  if (home.empty()) {
    if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  said(home.empty() ? "no HOME" : "HOME");
  return home.empty() ? std::string() : home + "/.cache/mpcaffe/kernels.sqlite";
}

namespace {
std::mutex default_mutex;
bool default_done = false;
std::shared_ptr<ProgramCache> default_cache;
}  // namespace

std::shared_ptr<ProgramCache> EnableProgramCache() {
  std::lock_guard<std::mutex> lock(default_mutex);
  if (default_done) return default_cache;
  default_done = true;
  std::string why;
  const std::string path = DefaultCachePath(&why);
  if (path.empty()) {
    if (why != "MPCAFFE_CACHE")
      std::fprintf(stderr,
                   "mpcaffe: warning: no kernel cache location (set MPCAFFE_CACHE, "
                   "XDG_CACHE_HOME or HOME); programs compile from source in every run\n");
    return nullptr;
  }
  default_cache = std::make_shared<ProgramCache>(CacheOptions{path});
  SetProgramBinaryStore(default_cache);
  return default_cache;
}

std::shared_ptr<ProgramCache> ActiveProgramCache() {
  std::lock_guard<std::mutex> lock(default_mutex);
  return default_cache;
}

}  // namespace mpcaffe::cache
