// tests/testing/net_text.h — a NetParameter from prototxt text written in a test.
#pragma once

#include <string>

#include "proto/model_io.h"

namespace mpcaffe::test_support {

/// Parses `text`; a malformed text throws with `source` and the line in the message.
inline caffe::NetParameter NetText(const std::string& text, const std::string& source = "<test>") {
  caffe::NetParameter p;
  ParseProtoFromText(text, source, &p);
  return p;
}

}  // namespace mpcaffe::test_support
