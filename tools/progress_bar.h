// tools/progress_bar.h — a tqdm-style progress bar on stderr for long commands
// ("bench net  42%|████▏     | 5/12 [00:31<00:43] fp16 b16: timing").
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace mpcaffe::tools {

/// Seconds as tqdm shows them: "MM:SS", "H:MM:SS" from an hour on, "??:??" when unknown.
inline std::string ClockText(double s) {
  if (!(s >= 0) || s > 359999) return "??:??";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%02ld:%02ld", t / 60, t % 60);
  return buf;
}

class ProgressBar {
 public:
  /// `total` units of work; nothing is drawn when `enabled` is false.
  ProgressBar(std::string label, long total, bool enabled = true)
      : label_(std::move(label)),
        total_(total > 0 ? total : 1),
        enabled_(enabled),
        start_(Clock::now()) {}
  ~ProgressBar() { Close(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  /// Sets the text after the bar (what is running now) and redraws.
  void Describe(const std::string& text) {
    text_ = text;
    Draw(true);
  }
  /// Advances by `n` units; redraws at most ten times a second (and at the end).
  void Advance(long n = 1) {
    done_ += n;
    if (done_ > total_) done_ = total_;
    Draw(done_ == total_);
  }
  /// Draws the final state and ends the line (once).
  void Close() {
    if (!enabled_ || closed_) return;
    Draw(true);
    std::fputc('\n', stderr);
    closed_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void Draw(bool force) {
    if (!enabled_ || closed_) return;
    const auto now = Clock::now();
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double frac = static_cast<double>(done_) / total_;
    const double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : -1;
    // Ten cells, each in eighths, as tqdm draws them.
    static const char* kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
    const int width = 10, eighths = static_cast<int>(frac * width * 8);
    std::string bar;
    for (int i = 0; i < eighths / 8; ++i) bar += "█";
    int cells = eighths / 8;
    if (cells < width && eighths % 8) bar += kEighths[eighths % 8], ++cells;
    bar += std::string(width - cells, ' ');
    char head[160];
    std::snprintf(head, sizeof head, "%s %3d%%|", label_.c_str(), static_cast<int>(frac * 100));
    char tail[96];
    std::snprintf(tail, sizeof tail, "| %ld/%ld [%s<%s] ", done_, total_, ClockText(elapsed).c_str(),
                  ClockText(eta).c_str());
    std::string line = std::string(head) + bar + tail + text_;
    const size_t visible = line.size();  // bytes; padding only needs to cover the last line
    if (visible < last_len_) line += std::string(last_len_ - visible, ' ');
    last_len_ = visible;
    std::fprintf(stderr, "\r%s", line.c_str());
    std::fflush(stderr);
  }

  std::string label_, text_;
  long total_, done_ = 0;
  bool enabled_, closed_ = false;
  size_t last_len_ = 0;
  Clock::time_point start_, last_{};
};

}  // namespace mpcaffe::tools
