// tools/progress_bar.h — a tqdm-style progress bar on stderr for long commands
// ("bench net  42%|████▏     | 5/12 [00:31<00:43] fp16 b16: timing"), redrawn in place on a
// terminal; written to a file or pipe it is a plain line every few seconds instead (a log gets no
// carriage-return frames).
#pragma once

#include <unistd.h>

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
  /// `total` units of work; nothing is drawn when `enabled` is false. On a terminal (stderr is a
  /// tty) the bar is redrawn in place at most ten times a second; otherwise a line
  /// "label 42% 5/12 [00:31<00:43] text" is written at most every `plain_interval` seconds,
  /// and once at the end.
  ProgressBar(std::string label, long total, bool enabled = true, double plain_interval = 5.0)
      : ProgressBar(std::move(label), total, enabled, isatty(fileno(stderr)) != 0,
                    plain_interval) {}
  /// As above with the terminal decided by the caller (tests), writing to `out`.
  ProgressBar(std::string label, long total, bool enabled, bool terminal, double plain_interval,
              std::FILE* out = stderr)
      : label_(std::move(label)),
        total_(total > 0 ? total : 1),
        enabled_(enabled),
        terminal_(terminal),
        plain_interval_(plain_interval),
        out_(out),
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
    if (terminal_) {
      Draw(true);
      std::fputc('\n', out_);
    } else if (done_ != plain_done_ || text_ != plain_text_ || plain_lines_ == 0) {
      PlainLine(Clock::now());
    }
    closed_ = true;
  }

 private:
  using Clock = std::chrono::steady_clock;

  /// Progress as "42%", "5/12 [00:31<00:43]" parts.
  struct Figures {
    double frac;
    std::string counts;
  };
  Figures Measure(Clock::time_point now) const {
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done_ > 0 ? elapsed / done_ * (total_ - done_) : -1;
    char counts[96];
    std::snprintf(counts, sizeof counts, "%ld/%ld [%s<%s]", done_, total_,
                  ClockText(elapsed).c_str(), ClockText(eta).c_str());
    return {static_cast<double>(done_) / total_, counts};
  }

  void PlainLine(Clock::time_point now) {
    const Figures f = Measure(now);
    std::fprintf(out_, "%s %3d%% %s %s\n", label_.c_str(), static_cast<int>(f.frac * 100),
                 f.counts.c_str(), text_.c_str());
    std::fflush(out_);
    last_ = now;
    plain_done_ = done_;
    plain_text_ = text_;
    ++plain_lines_;
  }

  void Draw(bool force) {
    if (!enabled_ || closed_) return;
    const auto now = Clock::now();
    if (!terminal_) {
      // A log: a line when plain_interval_ has passed since the last one (the first line waits
      // too, so short work writes only the final line from Close).
      if (now - (plain_lines_ ? last_ : start_) >=
          std::chrono::duration<double>(plain_interval_))
        PlainLine(now);
      return;
    }
    if (!force && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const Figures f = Measure(now);
    const double frac = f.frac;
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
    std::string line = std::string(head) + bar + "| " + f.counts + " " + text_;
    const size_t visible = line.size();  // bytes; padding only needs to cover the last line
    if (visible < last_len_) line += std::string(last_len_ - visible, ' ');
    last_len_ = visible;
    std::fprintf(out_, "\r%s", line.c_str());
    std::fflush(out_);
  }

  std::string label_, text_;
  long total_, done_ = 0;
  bool enabled_, terminal_;
  double plain_interval_;
  std::FILE* out_;
  bool closed_ = false;
  size_t last_len_ = 0;
  long plain_done_ = -1, plain_lines_ = 0;
  std::string plain_text_;
  Clock::time_point start_, last_{};
};

}  // namespace mpcaffe::tools
