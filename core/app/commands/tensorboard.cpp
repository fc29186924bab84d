// TensorBoard event files, encoded by hand: TFRecord framing around Event protocol buffers
// (tensorboard/compat/proto/event.proto, summary.proto, tensor.proto; field numbers below).
#include "commands/tensorboard.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <unistd.h>

#include "htm/error.h"

namespace htm::tensorboard {
namespace {

// Protocol buffer wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_key(std::string& out, uint32_t field, uint32_t wire) { put_varint(out, (field << 3) | wire); }

void put_little(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_bytes(std::string& out, uint32_t field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

void put_double(std::string& out, uint32_t field, double v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_little(out, bits, 8);
}

void put_float(std::string& out, uint32_t field, float v) {
  uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_little(out, bits, 4);
}

// `text` with every byte that is not part of well-formed UTF-8 replaced by '?': a tag is a proto3
// string, which a reader refuses whole (the event lost) when it is not UTF-8, and TensorBoard
// decodes text summaries as UTF-8.
std::string utf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t n = c < 0x80                        ? 1
                     : (c >> 5) == 0x6 && c >= 0xc2  ? 2
                     : (c >> 4) == 0xe               ? 3
                     : (c >> 3) == 0x1e && c <= 0xf4 ? 4
                                                     : 0;
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (ok && n >= 3) {  // no overlong forms, no surrogates, nothing past U+10FFFF
      const auto c1 = static_cast<unsigned char>(text[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) && !(c == 0xf0 && c1 < 0x90) &&
           !(c == 0xf4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(text, i, n);
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

// Event{wall_time = 1, step = 2, summary = 5{value = 1{...}}}.
std::string summary_event(double wall_time, int64_t step, const std::string& value) {
  std::string summary, event;
  put_bytes(summary, 1, value);  // Summary.value
  put_double(event, 1, wall_time);
  put_key(event, 2, kVarint);
  put_varint(event, static_cast<uint64_t>(step));  // int64: two's complement, as protobuf does
  put_bytes(event, 5, summary);
  return event;
}

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;  // Castagnoli, reflected
      t[i] = c;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto& table = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string file_version_event(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, "brain.Event:2");  // Event.file_version
  return event;
}

std::string scalar_event(double wall_time, int64_t step, const std::string& tag, float value) {
  std::string v;
  put_bytes(v, 1, utf8(tag));  // Summary.Value.tag
  put_float(v, 2, value);      // Summary.Value.simple_value
  return summary_event(wall_time, step, v);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& text) {
  std::string plugin, metadata, tensor, v;
  put_bytes(plugin, 1, "text");      // PluginData.plugin_name
  put_bytes(metadata, 1, plugin);    // SummaryMetadata.plugin_data
  put_key(metadata, 4, kVarint);     // SummaryMetadata.data_class
  put_varint(metadata, 2);           // DATA_CLASS_TENSOR, what the text plugin reads
  put_key(tensor, 1, kVarint);       // TensorProto.dtype
  put_varint(tensor, 7);             // DT_STRING
  put_bytes(tensor, 2, "");          // TensorProto.tensor_shape: no dimensions, a scalar
  put_bytes(tensor, 8, utf8(text));  // TensorProto.string_val
  put_bytes(v, 1, utf8(tag));        // Summary.Value.tag
  put_bytes(v, 9, metadata);         // Summary.Value.metadata
  put_bytes(v, 8, tensor);           // Summary.Value.tensor
  return summary_event(wall_time, step, v);
}

std::string event_file_name(double time, const std::string& host) {
  const long long seconds = std::isfinite(time) && time > 0 ? static_cast<long long>(time) : 0;
  return "events.out.tfevents." + std::to_string(seconds) + "." + host;
}

// The file is written under a name TensorBoard does not read (it takes every name holding
// "tfevents"), then renamed: a TensorBoard watching the folder never sees half a file.
EventFile::EventFile(const std::string& path, double wall_time)
    : path_(path), tmp_(path.substr(0, path.rfind('/') + 1) + ".htm-export-" + std::to_string(getpid()) + ".partial") {
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error("cannot write '" + tmp_ + "'");
  write(file_version_event(wall_time));
}

EventFile::~EventFile() {
  if (!closed_) {
    out_.close();
    std::remove(tmp_.c_str());
  }
}

void EventFile::write(const std::string& event) {
  std::string length;
  put_little(length, event.size(), 8);
  std::string frame = length;
  put_little(frame, masked_crc32c(length.data(), length.size()), 4);
  frame += event;
  put_little(frame, masked_crc32c(event.data(), event.size()), 4);
  out_.write(frame.data(), static_cast<std::streamsize>(frame.size()));
  if (!out_) throw Error("cannot write '" + tmp_ + "'");
}

void EventFile::close() {
  out_.close();
  if (!out_ || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    std::remove(tmp_.c_str());
    closed_ = true;
    throw Error("cannot write '" + path_ + "'");
  }
  closed_ = true;
}

}  // namespace htm::tensorboard
