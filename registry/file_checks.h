// What the registry checks of a library file before handing it to the dynamic loader, and the
// fingerprint a run records of each library it loaded.
#pragma once

#include <string>

namespace htm {

/// Empty when `path` holds a complete 64-bit ELF file: every header and loaded segment it
/// describes lies inside the file (dlopen maps a truncated one and dies of SIGBUS on touching
/// it). Otherwise the reason, as a sentence without the path.
std::string elf_problem(const std::string& path);

/// The file's SHA-256 as 64 lowercase hex digits (FIPS 180-4). Throws htm::Error when it
/// cannot be read.
std::string sha256_file(const std::string& path);
/// The same of bytes in memory.
std::string sha256_hex(const std::string& bytes);

}  // namespace htm
