#include "ir/env.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace ir::env {

namespace {

constexpr VarInfo kTable[] = {
#define RUNE_ENV_INT(id, name, fallback, meaning) \
  {Var::id, Kind::Int, name, fallback, #fallback, meaning},
#define RUNE_ENV_TEXT(id, name, fallback, meaning) \
  {Var::id, Kind::Text, name, 0, fallback, meaning},
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

int parse_int(const std::optional<std::string>& v, int fallback) {
  if (!v || v->empty()) return fallback;
  char* end = nullptr;
  long r = std::strtol(v->c_str(), &end, 10);
  return *end ? fallback : static_cast<int>(r);
}

// One variable, read once.
struct Slot {
  std::once_flag once;
  std::optional<std::string> value;
  int number = 0;  // Int variables: the parsed value
};

Slot& read(Var v) {
  // Leaked: a value may be read (and its reference used) while statics are destroyed.
  static auto* slots = new std::array<Slot, kCount>;
  Slot& s = (*slots)[static_cast<size_t>(v)];
  std::call_once(s.once, [&] {
    const VarInfo& row = kTable[static_cast<size_t>(v)];
    if (const char* p = std::getenv(row.name)) s.value = p;
    if (row.kind == Kind::Int) s.number = parse_int(s.value, row.int_default);
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
  return read(v).number;
}

}  // namespace ir::env
