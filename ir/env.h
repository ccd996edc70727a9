// The environment, read in one place: every variable the library reads is a row of
// ir/env.def (name, default, one-line meaning), documented in docs/env.md. Library code reads
// variables only through these readers, never with std::getenv (tests/runtime/test_env_table.cpp
// scans the library's sources for it).
//
// Each variable is read when it is first asked for and cached for the life of the process, so
// a value set before that first use counts (the tests set some at start-up) and a later change
// does not; value_now is the one exception (an API that reads its variables at each call).
// Reads are thread-safe.
//
// One rule for a bad value: it raises std::invalid_argument where it is read, naming the
// variable, the value and what was expected (bad_value's message); an empty value means unset
// unless docs/env.md says otherwise.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace ir::env {

enum class Var : uint8_t {
#define RUNE_ENV_INT(id, name, fallback, min, max, unset, meaning) id,
#define RUNE_ENV_TEXT(id, name, unset, meaning) id,
#include "ir/env.def"
#undef RUNE_ENV_INT
#undef RUNE_ENV_TEXT
};

enum class Kind : uint8_t { Int, Text };

struct VarInfo {
  Var var;
  Kind kind;
  const char* name;          // as set in the environment
  int int_default;           // an Int variable's value when unset or empty
  int int_min, int_max;      // an Int variable's accepted values
  const char* default_text;  // what unset means, in words
  const char* meaning;       // one line
};

// Every variable, in ir/env.def's order.
std::span<const VarInfo> table();
const VarInfo& info(Var v);

// The value as set (an empty value is a value), or nullopt when unset. The reference stays
// valid for the life of the process.
const std::optional<std::string>& value(Var v);

// An Int variable's value: its default when unset or empty. Any other value that is not a
// whole decimal number in [int_min, int_max] raises std::invalid_argument (bad_value's message,
// e.g. `RUNE_NUM_THREADS="two" is not a whole number (expected an integer in [1, 4096]; unset
// means every core)`), at every call. Throws std::logic_error for a Text variable.
int integer(Var v);

// The value as set at this call, not cached: for an API that reads its variables at each call
// (rune::distributed::init, which may be retried after a refused launch).
std::optional<std::string> value_now(Var v);

// The message of a bad value: `NAME="value" <problem> (expected <expected>; unset means
// <default_text>)`, e.g. problem "is not a plan", expected "portable or avx2". Readers of Text
// variables with a closed set of values raise std::invalid_argument with it.
std::string bad_value(Var v, const std::string& value, const std::string& problem,
                      const std::string& expected);

}  // namespace ir::env
