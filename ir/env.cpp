#include "ir/env.h"

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace ir::env {

namespace {

constexpr VarInfo kTable[] = {
#define RUNE_ENV_INT(id, name, fallback, min, max, unset, meaning) \
  {Var::id, Kind::Int, name, fallback, min, max, unset, meaning},
#define RUNE_ENV_TEXT(id, name, unset, meaning) \
  {Var::id, Kind::Text, name, 0, 0, 0, unset, meaning},
#include "ir/env.def"
#undef RUNE_ENV_INT
#undef RUNE_ENV_TEXT
};
constexpr size_t kCount = sizeof kTable / sizeof kTable[0];

// Rows are in enum order, so a Var indexes the table.
constexpr bool rows_in_order() {
  for (size_t i = 0; i < kCount; ++i)
    if (static_cast<size_t>(kTable[i].var) != i) return false;
  return true;
}
static_assert(rows_in_order());

// What an Int row accepts, in words.
std::string expected_int(const VarInfo& row) {
  if (row.int_min == 0 && row.int_max == 1) return "0 or 1";
  if (row.int_min == 1 && row.int_max == INT32_MAX) return "a positive integer";
  return "an integer in [" + std::to_string(row.int_min) + ", " + std::to_string(row.int_max) + "]";
}

// An Int row's value; `error` is set instead when the value is neither unset, empty nor a whole
// decimal number in the row's range (strtol must read all of it, without overflow).
int parse_int(const VarInfo& row, const std::optional<std::string>& v, std::string& error) {
  if (!v || v->empty()) return row.int_default;
  char* end = nullptr;
  errno = 0;
  const long r = std::strtol(v->c_str(), &end, 10);
  const bool number = end != v->c_str() && !*end;
  if (!number)
    error = bad_value(row.var, *v, "is not a whole number", expected_int(row));
  else if (errno == ERANGE || r < row.int_min || r > row.int_max)
    error = bad_value(row.var, *v, "is out of range", expected_int(row));
  return error.empty() ? static_cast<int>(r) : row.int_default;
}

// One variable, read once.
struct Slot {
  std::once_flag once;
  std::optional<std::string> value;
  int number = 0;     // Int variables: the parsed value
  std::string error;  // Int variables: why the value is bad (raised at every integer() call)
};

Slot& read(Var v) {
  // Leaked: a value may be read (and its reference used) while statics are destroyed.
  static auto* slots = new std::array<Slot, kCount>;
  Slot& s = (*slots)[static_cast<size_t>(v)];
  std::call_once(s.once, [&] {
    const VarInfo& row = kTable[static_cast<size_t>(v)];
    if (const char* p = std::getenv(row.name)) s.value = p;
    if (row.kind == Kind::Int) s.number = parse_int(row, s.value, s.error);
  });
  return s;
}

}  // namespace

std::span<const VarInfo> table() { return kTable; }

const VarInfo& info(Var v) { return kTable[static_cast<size_t>(v)]; }

const std::optional<std::string>& value(Var v) { return read(v).value; }

int integer(Var v) {
  if (info(v).kind != Kind::Int)
    throw std::logic_error(std::string("ir::env::integer: ") + info(v).name + " is not an integer");
  const Slot& s = read(v);
  if (!s.error.empty()) throw std::invalid_argument(s.error);
  return s.number;
}

std::optional<std::string> value_now(Var v) {
  if (const char* p = std::getenv(info(v).name)) return std::string(p);
  return std::nullopt;
}

std::string bad_value(Var v, const std::string& value, const std::string& problem,
                      const std::string& expected) {
  const VarInfo& row = info(v);
  return std::string(row.name) + "=\"" + value + "\" " + problem + " (expected " + expected +
         "; unset means " + row.default_text + ")";
}

}  // namespace ir::env
