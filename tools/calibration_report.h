// tools/calibration_report.h — what calibration changed, image by image: the fp32 net and the
// calibrated net score the same photographs (`mpcaffe calibrate --images`, held-out ones with
// --report-images) and the report gives per image both nets' top classes and scores, and over the
// set the top-1 agreement, the mean |score difference| and every decision that changed (with
// the labels of a list file, each net's accuracy too).
#pragma once

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tools/image_scores.h"

namespace mpcaffe::tools {

namespace report_detail {
inline std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}
inline std::string TopJson(const ClassScores& s, size_t image, const std::vector<int>& top) {
  std::string json = "[";
  for (size_t k = 0; k < top.size(); ++k)
    json += std::string(k ? ", " : "") + "{\"class\": " + std::to_string(top[k]) +
            ", \"score\": " + Number(s.row(image)[top[k]]) + "}";
  return json + "]";
}
}  // namespace report_detail

/// Compares `fp32` and `calibrated` scores of the images `paths` (labels -1 when unknown),
/// prints the summary and, when `json_path` is not empty, writes the whole report there.
inline void ReportCalibration(const ClassScores& fp32, const ClassScores& calibrated,
                              const std::vector<std::string>& paths, const std::vector<int>& labels,
                              const std::string& dtype, const std::string& source,
                              const std::string& json_path) {
  using report_detail::Number;
  const size_t n = paths.size();
  if (fp32.classes != calibrated.classes || fp32.images() != n || calibrated.images() != n)
    throw Error("calibration report: the fp32 and " + dtype + " nets gave scores of different "
                "shapes ('" + fp32.output + "': " + std::to_string(fp32.classes) + " vs " +
                std::to_string(calibrated.classes) + " classes)");
  size_t top1_same = 0, in_top5 = 0, labelled = 0, fp32_right = 0, calibrated_right = 0;
  double sum_diff = 0, max_diff = 0;
  std::vector<size_t> changed;
  std::string per_image;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int> a = TopClasses(fp32.row(i), fp32.classes, 5);
    const std::vector<int> b = TopClasses(calibrated.row(i), calibrated.classes, 5);
    double diff = 0;
    for (int c = 0; c < fp32.classes; ++c) {
      const double d = std::fabs(double(fp32.row(i)[c]) - calibrated.row(i)[c]);
      diff += d;
      max_diff = std::max(max_diff, d);
    }
    diff /= fp32.classes;
    sum_diff += diff;
    top1_same += a[0] == b[0];
    in_top5 += std::find(b.begin(), b.end(), a[0]) != b.end();
    if (a[0] != b[0]) changed.push_back(i);
    if (labels[i] >= 0) {
      ++labelled;
      fp32_right += a[0] == labels[i];
      calibrated_right += b[0] == labels[i];
    }
    per_image += std::string(i ? ",\n    " : "") + "{\"path\": \"" + JsonEscape(paths[i]) +
                 "\", \"label\": " + std::to_string(labels[i]) +
                 ", \"fp32_top5\": " + report_detail::TopJson(fp32, i, a) +
                 ", \"calibrated_top5\": " + report_detail::TopJson(calibrated, i, b) +
                 ", \"top1_agrees\": " + (a[0] == b[0] ? "true" : "false") +
                 ", \"mean_abs_score_difference\": " + Number(diff) + "}";
  }
  const double agreement = n ? double(top1_same) / n : 0;
  std::printf("Report on the %zu image(s) of '%s' (scores '%s', %d classes): %s top-1 agrees "
              "with fp32 on %zu (%.1f %%), fp32's top-1 is in %s's top-5 on %zu; mean |score "
              "difference| %.3g (largest %.3g); %zu decision(s) changed\n",
              n, source.c_str(), fp32.output.c_str(), fp32.classes, dtype.c_str(), top1_same,
              100.0 * agreement, dtype.c_str(), in_top5, n ? sum_diff / n : 0.0, max_diff,
              changed.size());
  for (size_t i : changed) {
    const int a = TopClasses(fp32.row(i), fp32.classes, 1)[0];
    const int b = TopClasses(calibrated.row(i), calibrated.classes, 1)[0];
    std::printf("  %s: fp32 class %d (%.4f) -> %s class %d (%.4f)\n", paths[i].c_str(), a,
                fp32.row(i)[a], dtype.c_str(), b, calibrated.row(i)[b]);
  }
  if (labelled)
    std::printf("Against the list's labels (%zu image(s)): fp32 top-1 %.1f %%, %s top-1 %.1f %%\n",
                labelled, 100.0 * fp32_right / labelled, dtype.c_str(),
                100.0 * calibrated_right / labelled);
  if (json_path.empty()) return;
  std::string json = "{\n  \"images\": \"" + JsonEscape(source) + "\", \"dtype\": \"" +
                     JsonEscape(dtype) + "\", \"scores\": \"" + JsonEscape(fp32.output) +
                     "\", \"classes\": " + std::to_string(fp32.classes) +
                     ", \"count\": " + std::to_string(n) +
                     ",\n  \"top1_agreement\": " + Number(agreement) +
                     ", \"fp32_top1_in_calibrated_top5\": " + Number(n ? double(in_top5) / n : 0) +
                     ", \"mean_abs_score_difference\": " + Number(n ? sum_diff / n : 0) +
                     ", \"max_abs_score_difference\": " + Number(max_diff) +
                     ", \"changed\": " + std::to_string(changed.size());
  if (labelled)
    json += ",\n  \"labelled\": " + std::to_string(labelled) + ", \"fp32_top1_accuracy\": " +
            Number(double(fp32_right) / labelled) + ", \"calibrated_top1_accuracy\": " +
            Number(double(calibrated_right) / labelled);
  json += ",\n  \"per_image\": [\n    " + per_image + "\n  ]\n}\n";
  std::ofstream f(json_path);
  if (!(f << json)) throw Error("--report '" + json_path + "': cannot write the file");
  std::printf("Wrote %s\n", json_path.c_str());
}

}  // namespace mpcaffe::tools
