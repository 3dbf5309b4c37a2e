// proto/model_io.h — reading and writing Caffe model files: text .prototxt / solver files,
// binary .caffemodel / .binaryproto, with BVLC's format upgrades applied on load.
#pragma once

#include <string>

#include "device/error.h"
#include "proto/caffe.pb.h"

namespace google::protobuf {
class Message;
}

namespace mpcaffe {

/// A model file could not be opened, parsed, upgraded or written. what() names the file, and for
/// text files the 1-based line and column of the error ("net.prototxt:12:5: ...").
class ModelFileError : public Error {
 public:
  using Error::Error;
};

// ---- Generic protobuf file I/O -------------------------------------------------------------

/// Parses the text-format file at `path` into `*message` (cleared first). Throws ModelFileError
/// naming path:line:column for a syntax error or unknown field, or naming the path when the file
/// cannot be read.
void ReadProtoFromTextFile(const std::string& path, google::protobuf::Message* message);

/// Parses text-format `text` into `*message` (cleared first); `source_name` stands for the file
/// name in error messages (e.g. "<NetSpec>").
void ParseProtoFromText(const std::string& text, const std::string& source_name,
                        google::protobuf::Message* message);

/// Writes `message` in text format to `path`, atomically (temporary file in the same directory,
/// then rename), so an interrupted write never leaves a truncated file.
void WriteProtoToTextFile(const google::protobuf::Message& message, const std::string& path);

/// Parses the binary protobuf file at `path` into `*message` (cleared first). Files up to
/// protobuf's 2 GiB message limit are accepted. Throws ModelFileError naming the path when the
/// file is missing, empty, truncated or not a valid message of that type.
void ReadProtoFromBinaryFile(const std::string& path, google::protobuf::Message* message);

/// Writes `message` in binary form to `path`, atomically, with deterministic serialization (the
/// same message always gives the same bytes).
void WriteProtoToBinaryFile(const google::protobuf::Message& message, const std::string& path);

// ---- Caffe files, upgraded on load ---------------------------------------------------------

/// Reads a network definition (.prototxt) and upgrades it to the current format (V0/V1 `layers`
/// to `layer`, `input`/`input_dim`/`input_shape` to an Input layer, data-transformation fields,
/// BatchNorm param specs). Errors name the file.
caffe::NetParameter ReadNetParameterText(const std::string& path);

/// Reads trained weights (.caffemodel, binary NetParameter) and upgrades them like
/// ReadNetParameterText.
caffe::NetParameter ReadNetParameterBinary(const std::string& path);

/// Reads a solver definition and upgrades the deprecated `solver_type` enum to the `type` string
/// (and any nets given inline).
caffe::SolverParameter ReadSolverText(const std::string& path);

/// Reads a .binaryproto blob, e.g. an image mean file.
caffe::BlobProto ReadBlobProtoBinary(const std::string& path);

}  // namespace mpcaffe
