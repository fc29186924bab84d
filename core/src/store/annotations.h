// What people add to runs after the fact, from htm serve's pages (docs/serve.md, "Writing from
// the page"): a note per run, tags of their own per run, an archived flag per run, and saved views
// of the runs table. Each lives in a table of its own beside the results (docs/results.md), so
// that no write from a page can touch a metric, a setting or the tags a run recorded itself.
// ResultsStore reads and writes them (annotations.cpp); merge_from carries them by run uuid.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace htm {

/// The annotation tables (idempotent): every read-write open of a results database creates them.
extern const char* const kAnnotationSchema;

inline constexpr size_t kNoteMaxBytes = 16384;      ///< a run's note
inline constexpr size_t kTagKeyMaxBytes = 64;       ///< a user tag's key: letters, digits, . _ -
inline constexpr size_t kTagValueMaxBytes = 256;    ///< a user tag's value: one line
inline constexpr size_t kViewNameMaxBytes = 100;    ///< a saved view's name: one line
inline constexpr size_t kViewStateMaxBytes = 4096;  ///< a saved view's state: the page's query string

/// What a person added to one run.
struct RunAnnotations {
  std::string note;                         ///< "" when none (or emptied)
  double note_at = 0;                       ///< when the note was last written (seconds since 1970); 0: never
  std::map<std::string, std::string> tags;  ///< the user's tags (run_user_tags), not the run's own
  bool archived = false;
};

/// A named state of the runs table: the query string of its address (filters, columns, sort,
/// group, selection), without a leading '?' and never with a token in it.
struct SavedView {
  std::string name, state;
  double updated_at = 0;
};

/// Why a value may not be written ("" when it may): too long, a control character, not UTF-8, a
/// key with other characters than letters, digits, '.', '_' and '-'. The store refuses such a
/// value, and htm serve answers 400 with this text.
std::string note_problem(const std::string& text);
std::string tag_key_problem(const std::string& key);
std::string tag_value_problem(const std::string& value);
std::string view_name_problem(const std::string& name);
std::string view_state_problem(const std::string& state);

}  // namespace htm
