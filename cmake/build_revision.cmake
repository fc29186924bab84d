# Writes OUT: HTM_BUILD_REVISION, the source tree's HEAD (12 hex digits) with "-dirty" when a
# tracked file differs from it, or "unknown" without git. Run at every build; the file is
# rewritten only when the text changes, so its one reader recompiles only then.
#   cmake -DSRC=<source dir> -DOUT=<header> -P cmake/build_revision.cmake
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR revision STREQUAL "")
  set(revision "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT changes STREQUAL "")
    string(APPEND revision "-dirty")
  endif()
endif()
set(text "// Written by cmake/build_revision.cmake at build time.\n#define HTM_BUILD_REVISION \"${revision}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
