// proto/model_io.cc — text and binary protobuf file I/O with errors naming file, line and
// column, large-file limits raised, and atomic writes (temporary file + rename).
#include "proto/model_io.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/message.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <vector>

#include "proto/upgrade.h"

namespace mpcaffe {
namespace {

namespace pb = google::protobuf;

std::string ErrnoText(int err) { return std::strerror(err); }

// Collects the text parser's errors as "source:line:column: message" (1-based numbers).
class TextErrorCollector : public pb::io::ErrorCollector {
 public:
  explicit TextErrorCollector(std::string source) : source_(std::move(source)) {}

  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    std::ostringstream out;
    out << source_ << ':' << line + 1 << ':' << column + 1 << ": " << message;
    errors_.push_back(out.str());
  }

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

// Reads a whole file into memory; the error names the path and the reason.
std::string ReadWholeFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw ModelFileError("cannot open model file '" + path + "': " + ErrnoText(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    throw ModelFileError("cannot read model file '" + path + "': it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw ModelFileError("cannot open model file '" + path + "': " + ErrnoText(errno));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    throw ModelFileError("error while reading model file '" + path + "'");
  }
  return contents.str();
}

// Mode for a newly written file: the mode of the file it replaces, else rw-r--r--.
mode_t ModeForReplacement(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  return 0644;
}

// Creates a temporary file next to `path`, lets `write` fill the descriptor, syncs it and renames
// it over `path`. On any failure the temporary file is removed and `path` is left untouched.
// `write` returns an empty string on success, else the reason of the failure.
void WriteFileAtomically(const std::string& path, const std::function<std::string(int fd)>& write) {
  std::string tmp = path + ".tmp.XXXXXX";
  std::vector<char> tmp_name(tmp.begin(), tmp.end());
  tmp_name.push_back('\0');
  int fd = ::mkstemp(tmp_name.data());
  if (fd < 0) {
    throw ModelFileError("cannot write model file '" + path +
                         "': cannot create a temporary file next to it: " + ErrnoText(errno));
  }
  tmp.assign(tmp_name.data());
  std::string failure;
  if (::fchmod(fd, ModeForReplacement(path)) != 0) failure = "fchmod: " + ErrnoText(errno);
  if (failure.empty()) failure = write(fd);
  if (failure.empty() && ::fsync(fd) != 0) failure = "fsync: " + ErrnoText(errno);
  if (::close(fd) != 0 && failure.empty()) failure = "close: " + ErrnoText(errno);
  if (failure.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    failure = "rename from '" + tmp + "': " + ErrnoText(errno);
  }
  if (!failure.empty()) {
    ::unlink(tmp.c_str());
    throw ModelFileError("cannot write model file '" + path + "': " + failure);
  }
}

// Writes all of `data` to `fd`; returns the failure reason or an empty string.
std::string WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return "write: " + ErrnoText(errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return "";
}

}  // namespace

void ParseProtoFromText(const std::string& text, const std::string& source_name,
                        pb::Message* message) {
  message->Clear();
  TextErrorCollector collector(source_name);
  pb::TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  if (parser.ParseFromString(text, message)) return;
  std::string what;
  for (const std::string& error : collector.errors()) {
    if (!what.empty()) what += '\n';
    what += error;
  }
  if (what.empty()) {
    what = source_name + ": not a valid text-format " + message->GetTypeName();
  } else {
    what += " (while parsing " + message->GetTypeName() + ")";
  }
  throw ModelFileError(what);
}

void ReadProtoFromTextFile(const std::string& path, pb::Message* message) {
  ParseProtoFromText(ReadWholeFile(path), path, message);
}

void WriteProtoToTextFile(const pb::Message& message, const std::string& path) {
  std::string text;
  if (!pb::TextFormat::PrintToString(message, &text)) {
    throw ModelFileError("cannot write model file '" + path + "': cannot print " +
                         message.GetTypeName() + " as text");
  }
  WriteFileAtomically(path, [&](int fd) { return WriteAll(fd, text.data(), text.size()); });
}

void ReadProtoFromBinaryFile(const std::string& path, pb::Message* message) {
  message->Clear();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    throw ModelFileError("cannot open model file '" + path + "': " + ErrnoText(errno));
  }
  if (S_ISDIR(st.st_mode)) {
    throw ModelFileError("cannot read model file '" + path + "': it is a directory");
  }
  if (st.st_size == 0) {
    throw ModelFileError("model file '" + path + "' is empty (0 bytes), expected a binary " +
                         message->GetTypeName());
  }
  if (st.st_size > INT_MAX) {
    throw ModelFileError("model file '" + path + "' has " + std::to_string(st.st_size) +
                         " bytes, more than protobuf's 2 GiB message limit");
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw ModelFileError("cannot open model file '" + path + "': " + ErrnoText(errno));
  }
  bool parsed;
  int read_errno;
  {
    pb::io::FileInputStream raw(fd);
    raw.SetCloseOnDelete(true);
    pb::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    parsed = message->ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
    read_errno = raw.GetErrno();
  }
  if (read_errno != 0) {
    throw ModelFileError("error while reading model file '" + path + "': " + ErrnoText(read_errno));
  }
  if (!parsed) {
    throw ModelFileError("model file '" + path + "' (" + std::to_string(st.st_size) +
                         " bytes) is not a valid binary " + message->GetTypeName() +
                         ": truncated, corrupt, or a different kind of file");
  }
}

void WriteProtoToBinaryFile(const pb::Message& message, const std::string& path) {
  if (!message.IsInitialized()) {
    throw ModelFileError("cannot write model file '" + path + "': the " + message.GetTypeName() +
                         " is missing required fields: " + message.InitializationErrorString());
  }
  size_t size = message.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    throw ModelFileError("cannot write model file '" + path + "': the " + message.GetTypeName() +
                         " has " + std::to_string(size) +
                         " bytes, more than protobuf's 2 GiB message limit");
  }
  WriteFileAtomically(path, [&](int fd) -> std::string {
    pb::io::FileOutputStream raw(fd);
    bool ok;
    {
      pb::io::CodedOutputStream coded(&raw);
      coded.SetSerializationDeterministic(true);
      ok = message.SerializeToCodedStream(&coded) && !coded.HadError();
    }
    ok = raw.Flush() && ok;
    if (raw.GetErrno() != 0) return "write: " + ErrnoText(raw.GetErrno());
    if (!ok) return "cannot serialize " + message.GetTypeName();
    return "";
  });
}

caffe::NetParameter ReadNetParameterText(const std::string& path) {
  caffe::NetParameter net;
  ReadProtoFromTextFile(path, &net);
  UpgradeNetAsNeeded(path, &net);
  return net;
}

caffe::NetParameter ReadNetParameterBinary(const std::string& path) {
  caffe::NetParameter net;
  ReadProtoFromBinaryFile(path, &net);
  UpgradeNetAsNeeded(path, &net);
  return net;
}

caffe::SolverParameter ReadSolverText(const std::string& path) {
  caffe::SolverParameter solver;
  ReadProtoFromTextFile(path, &solver);
  UpgradeSolverAsNeeded(path, &solver);
  return solver;
}

caffe::BlobProto ReadBlobProtoBinary(const std::string& path) {
  caffe::BlobProto blob;
  ReadProtoFromBinaryFile(path, &blob);
  return blob;
}

}  // namespace mpcaffe
