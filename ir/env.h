// The environment, read in one place: every variable the library reads is a row of
// ir/env.def (name, default, one-line meaning), documented in docs/env.md. Library code reads
// variables only through these readers, never with std::getenv.
//
// Each variable is read when it is first asked for and cached for the life of the process, so
// a value set before that first use counts (the tests set some at start-up) and a later change
// does not. Reads are thread-safe.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ir::env {

enum class Var : uint8_t {
#define RUNE_ENV_INT(id, name, fallback, meaning) id,
#define RUNE_ENV_TEXT(id, name, fallback, meaning) id,
#include "ir/env.def"
#undef RUNE_ENV_INT
#undef RUNE_ENV_TEXT
};

enum class Kind : uint8_t { Int, Text };

struct VarInfo {
  Var var;
  Kind kind;
  const char* name;          // as set in the environment
  int int_default;           // an Int variable's value when unset or not a number
  const char* default_text;  // what unset means, in words
  const char* meaning;       // one line
};

// Every variable, in ir/env.def's order.
std::span<const VarInfo> table();
const VarInfo& info(Var v);

// The value as set (an empty value is a value), or nullopt when unset. The reference stays
// valid for the life of the process.
const std::optional<std::string>& value(Var v);

// An Int variable's value: its default when unset, empty or not a whole decimal number
// (strtol must read all of it). Throws std::logic_error for a Text variable.
int integer(Var v);

}  // namespace ir::env
