// TensorBoard event files written by htm itself (no TensorFlow, no protobuf library): each record
// is TFRecord-framed (length, masked CRC32C of the length, data, masked CRC32C of the data) around
// an Event protocol buffer encoded by hand from tensorboard's event.proto and summary.proto.
// Pure C++: no libtorch header, no store.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace htm::tensorboard {

/// CRC-32C (Castagnoli) of `size` bytes.
uint32_t crc32c(const void* data, size_t size);
/// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

/// One encoded Event: the file's first, Event{wall_time, file_version = "brain.Event:2"}.
std::string file_version_event(double wall_time);
/// Event{wall_time, step, summary{value{tag, simple_value}}}: a scalar (NaN stays a NaN float).
/// Tags and texts are written as UTF-8, a byte outside well-formed UTF-8 as '?' (a reader refuses
/// a whole event whose tag, a proto3 string, is not UTF-8).
std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value);
/// Event{wall_time, step, summary{value{tag, metadata{plugin_data{plugin_name = "text"},
/// data_class = DATA_CLASS_TENSOR}, tensor{DT_STRING, scalar shape, string_val = text}}}}: the
/// text plugin's summary (TensorBoard renders it as Markdown).
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text);

/// `events.out.tfevents.<time>.<host>`, the name TensorBoard looks for (time: whole seconds).
std::string event_file_name(double time, const std::string& host);

/// Writes TFRecords to `path` through a hidden `.htm-export-<pid>.partial` beside it (a name
/// TensorBoard does not read), renamed over it by close(); the file starts
/// with the file-version event. Throws htm::Error naming the path when it cannot write.
class EventFile {
 public:
  EventFile(const std::string& path, double wall_time);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  /// Appends one record holding `event` (an encoded Event).
  void write(const std::string& event);
  /// Flushes and renames the file into place.
  void close();

 private:
  std::string path_, tmp_;
  std::ofstream out_;
  bool closed_ = false;
};

}  // namespace htm::tensorboard
