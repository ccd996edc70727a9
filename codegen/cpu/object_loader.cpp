#include "codegen/cpu/object_loader.h"

#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <map>

namespace codegen::cpu {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kStubSize = 16;  // jmp *0(%rip); .quad target; 2 bytes of padding

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The pages of one loaded object; unmapped with its last owner.
struct Mapping {
  void* base = MAP_FAILED;
  size_t size = 0;
  ~Mapping() {
    if (base != MAP_FAILED) ::munmap(base, size);
  }
};

// The object as bytes, with the bounds checks every read goes through: a malformed file is a
// refusal (the caller falls back to ORC), never a read outside the buffer.
class Elf {
 public:
  explicit Elf(const std::string& s) : s_(s) {}
  bool has(uint64_t off, uint64_t len) const { return off <= s_.size() && len <= s_.size() - off; }
  template <class T>
  T at(uint64_t off) const {
    T v;
    std::memcpy(&v, s_.data() + off, sizeof v);
    return v;
  }
  const char* data(uint64_t off) const { return s_.data() + off; }
  // The NUL-terminated string at `off` of the string table `tab`, or nullptr.
  const char* str(const Elf64_Shdr& tab, uint64_t off) const {
    if (tab.sh_type != SHT_STRTAB || !has(tab.sh_offset, tab.sh_size) || off >= tab.sh_size)
      return nullptr;
    const char* p = s_.data() + tab.sh_offset + off;
    if (!std::memchr(p, 0, tab.sh_size - off)) return nullptr;
    return p;
  }

 private:
  const std::string& s_;
};

enum class Region { None, Code, ReadOnly, Writable };

bool starts_with(const char* s, const char* prefix) {
  return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
}

}  // namespace

std::optional<ElfLoad> load_elf_object(const std::string& object,
                                       const std::vector<std::string>& symbols, std::string* why) {
  auto refuse = [&](const std::string& reason) -> std::optional<ElfLoad> {
    if (why) *why = reason;
    return std::nullopt;
  };
  const Elf f(object);
  if (!f.has(0, sizeof(Elf64_Ehdr))) return refuse("shorter than an ELF header");
  const auto eh = f.at<Elf64_Ehdr>(0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return refuse("not a 64-bit little-endian ELF file");
  if (eh.e_machine != EM_X86_64 || eh.e_type != ET_REL)
    return refuse("not an x86-64 relocatable object");
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum >= SHN_LORESERVE ||
      !f.has(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)) || eh.e_shstrndx >= eh.e_shnum)
    return refuse("bad section header table");
  const size_t n = eh.e_shnum;
  std::vector<Elf64_Shdr> sh(n);
  for (size_t i = 0; i < n; ++i) sh[i] = f.at<Elf64_Shdr>(eh.e_shoff + i * sizeof(Elf64_Shdr));
  const Elf64_Shdr& shstr = sh[eh.e_shstrndx];

  // Which sections are loaded, and where. .eh_frame is left out: kernels never throw, and
  // nothing unwinds through them (ORC registers it; without it the code is the same).
  std::vector<Region> region(n, Region::None);
  std::vector<uint64_t> offset(n, 0);
  int symtab = -1;
  for (size_t i = 0; i < n; ++i) {
    const Elf64_Shdr& s = sh[i];
    const char* name = f.str(shstr, s.sh_name);
    if (!name) return refuse("bad section name");
    if (s.sh_type == SHT_SYMTAB) {
      if (symtab >= 0) return refuse("two symbol tables");
      symtab = static_cast<int>(i);
    }
    if (!(s.sh_flags & SHF_ALLOC)) continue;
    if (s.sh_type == SHT_X86_64_UNWIND || std::strcmp(name, ".eh_frame") == 0) continue;
    if (s.sh_flags & SHF_TLS) return refuse(std::string("thread-local section ") + name);
    if (s.sh_type == SHT_INIT_ARRAY || s.sh_type == SHT_FINI_ARRAY ||
        s.sh_type == SHT_PREINIT_ARRAY || starts_with(name, ".ctors") ||
        starts_with(name, ".dtors"))
      return refuse(std::string("initialiser section ") + name);
    if (s.sh_type != SHT_PROGBITS && s.sh_type != SHT_NOBITS)
      return refuse(std::string("section ") + name + " of type " + std::to_string(s.sh_type));
    if ((s.sh_flags & SHF_EXECINSTR) && (s.sh_flags & SHF_WRITE))
      return refuse(std::string("writable code section ") + name);
    const uint64_t align = s.sh_addralign ? s.sh_addralign : 1;
    if ((align & (align - 1)) != 0 || align > kPage)
      return refuse(std::string("alignment of ") + name);
    if (s.sh_type == SHT_PROGBITS && !f.has(s.sh_offset, s.sh_size))
      return refuse(std::string("section ") + name + " outside the file");
    if (s.sh_size > (uint64_t{1} << 30)) return refuse(std::string("size of ") + name);
    region[i] = (s.sh_flags & SHF_EXECINSTR) ? Region::Code
                : (s.sh_flags & SHF_WRITE)   ? Region::Writable
                                             : Region::ReadOnly;
  }
  if (symtab < 0) return refuse("no symbol table");
  const Elf64_Shdr& st = sh[symtab];
  if (st.sh_entsize != sizeof(Elf64_Sym) || !f.has(st.sh_offset, st.sh_size) || st.sh_link >= n)
    return refuse("bad symbol table");
  const size_t nsym = st.sh_size / sizeof(Elf64_Sym);
  const Elf64_Shdr& strtab = sh[st.sh_link];
  auto sym = [&](size_t k) { return f.at<Elf64_Sym>(st.sh_offset + k * sizeof(Elf64_Sym)); };

  // The relocations: their kinds decide which symbols need a GOT slot (GOTPCREL) or a jump stub
  // (PLT32 calls into the process, which may lie beyond a 32-bit displacement).
  std::vector<size_t> relas;
  std::map<uint32_t, uint64_t> got, stubs;  // symbol index -> slot offset (set below)
  for (size_t i = 0; i < n; ++i) {
    const Elf64_Shdr& s = sh[i];
    if (s.sh_type != SHT_RELA && s.sh_type != SHT_REL) continue;
    if (s.sh_info >= n || region[s.sh_info] == Region::None) continue;  // e.g. .rela.eh_frame
    if (s.sh_type == SHT_REL) return refuse("REL relocations");
    if (s.sh_link != static_cast<uint32_t>(symtab) || s.sh_entsize != sizeof(Elf64_Rela) ||
        !f.has(s.sh_offset, s.sh_size))
      return refuse("bad relocation section");
    relas.push_back(i);
    for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= s.sh_size; off += sizeof(Elf64_Rela)) {
      const auto r = f.at<Elf64_Rela>(s.sh_offset + off);
      const uint32_t k = ELF64_R_SYM(r.r_info);
      if (k >= nsym) return refuse("relocation against a bad symbol");
      switch (ELF64_R_TYPE(r.r_info)) {
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
          got.emplace(k, 0);
          break;
        case R_X86_64_PLT32:
          if (sym(k).st_shndx == SHN_UNDEF) stubs.emplace(k, 0);
          break;
        default:
          break;
      }
    }
  }

  // The layout: code, then the stubs; the constants, then the GOT; the writable data. Each
  // part starts on a page of its own, so each gets its own protection.
  uint64_t size = 0;
  auto place = [&](Region want) {
    for (size_t i = 0; i < n; ++i) {
      if (region[i] != want) continue;
      size = align_up(size, sh[i].sh_addralign ? sh[i].sh_addralign : 1);
      offset[i] = size;
      size += sh[i].sh_size;
    }
  };
  place(Region::Code);
  size = align_up(size, kStubSize);
  for (auto& [k, at] : stubs) at = size, size += kStubSize;
  const uint64_t code_end = align_up(size, kPage);
  size = code_end;
  place(Region::ReadOnly);
  size = align_up(size, 8);
  for (auto& [k, at] : got) at = size, size += 8;
  const uint64_t ro_end = align_up(size, kPage);
  size = ro_end;
  place(Region::Writable);
  size = align_up(std::max<uint64_t>(size, 1), kPage);

  auto map = std::make_shared<Mapping>();
  map->base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map->base == MAP_FAILED) return refuse("mmap failed");
  map->size = size;
  char* base = static_cast<char*>(map->base);
  const uint64_t base_addr = reinterpret_cast<uint64_t>(base);
  for (size_t i = 0; i < n; ++i)
    if (region[i] != Region::None && sh[i].sh_type == SHT_PROGBITS)
      std::memcpy(base + offset[i], f.data(sh[i].sh_offset), sh[i].sh_size);

  // Every symbol's address: a loaded section's plus the value, an absolute value, or the
  // process's definition of an undefined name (as ORC's process generator binds it).
  std::vector<uint64_t> addr(nsym, 0);
  std::vector<char> known(nsym, 0);
  auto address = [&](uint32_t k, std::string* err) -> std::optional<uint64_t> {
    if (known[k]) return addr[k];
    const Elf64_Sym s = sym(k);
    if (k == 0) {
      addr[k] = 0;
    } else if (s.st_shndx == SHN_UNDEF) {
      const char* name = f.str(strtab, s.st_name);
      if (!name || !*name) return *err = "an undefined symbol without a name", std::nullopt;
      if (std::strcmp(name, "_GLOBAL_OFFSET_TABLE_") == 0)
        return *err = "a reference to _GLOBAL_OFFSET_TABLE_", std::nullopt;
      dlerror();
      void* p = dlsym(RTLD_DEFAULT, name);
      if (!p) return *err = std::string("undefined symbol ") + name, std::nullopt;
      addr[k] = reinterpret_cast<uint64_t>(p);
    } else if (s.st_shndx == SHN_ABS) {
      addr[k] = s.st_value;
    } else if (s.st_shndx >= SHN_LORESERVE) {
      return *err = "a symbol in special section " + std::to_string(s.st_shndx), std::nullopt;
    } else if (s.st_shndx >= n || region[s.st_shndx] == Region::None) {
      return *err = "a symbol in a section not loaded", std::nullopt;
    } else {
      addr[k] = base_addr + offset[s.st_shndx] + s.st_value;
    }
    known[k] = 1;
    return addr[k];
  };

  std::string err;
  for (auto& [k, at] : stubs) {
    auto target = address(k, &err);
    if (!target) return refuse(err);
    // jmp *0(%rip), then the target's address.
    static const unsigned char jmp[6] = {0xff, 0x25, 0, 0, 0, 0};
    std::memcpy(base + at, jmp, sizeof jmp);
    std::memcpy(base + at + 6, &*target, 8);
  }
  for (auto& [k, at] : got) {
    auto target = address(k, &err);
    if (!target) return refuse(err);
    std::memcpy(base + at, &*target, 8);
  }

  auto fits32 = [](int64_t v) {
    return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  };
  for (size_t i : relas) {
    const Elf64_Shdr& s = sh[i];
    const Elf64_Shdr& target = sh[s.sh_info];
    if (target.sh_type == SHT_NOBITS) return refuse("relocations in a NOBITS section");
    char* sec = base + offset[s.sh_info];
    for (uint64_t off = 0; off + sizeof(Elf64_Rela) <= s.sh_size; off += sizeof(Elf64_Rela)) {
      const auto r = f.at<Elf64_Rela>(s.sh_offset + off);
      const uint32_t k = ELF64_R_SYM(r.r_info);
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      const uint64_t width = type == R_X86_64_64 || type == R_X86_64_PC64 ? 8 : 4;
      if (type == R_X86_64_NONE) continue;
      if (r.r_offset > target.sh_size || width > target.sh_size - r.r_offset)
        return refuse("relocation outside its section");
      char* where = sec + r.r_offset;
      const uint64_t P = reinterpret_cast<uint64_t>(where);
      const int64_t A = r.r_addend;
      auto S = address(k, &err);
      if (!S) return refuse(err);
      auto put32 = [&](int64_t v) -> bool {
        if (!fits32(v)) return false;
        const int32_t w = static_cast<int32_t>(v);
        std::memcpy(where, &w, 4);
        return true;
      };
      bool ok = true;
      switch (type) {
        case R_X86_64_64: {
          const uint64_t v = *S + static_cast<uint64_t>(A);
          std::memcpy(where, &v, 8);
          break;
        }
        case R_X86_64_PC64: {
          const uint64_t v = *S + static_cast<uint64_t>(A) - P;
          std::memcpy(where, &v, 8);
          break;
        }
        case R_X86_64_PC32:
          ok = put32(static_cast<int64_t>(*S + static_cast<uint64_t>(A) - P));
          break;
        case R_X86_64_PLT32: {
          const auto stub = stubs.find(k);
          const uint64_t L = stub != stubs.end() ? base_addr + stub->second : *S;
          ok = put32(static_cast<int64_t>(L + static_cast<uint64_t>(A) - P));
          break;
        }
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
          ok = put32(static_cast<int64_t>(base_addr + got.at(k) + static_cast<uint64_t>(A) - P));
          break;
        case R_X86_64_32: {
          const uint64_t v = *S + static_cast<uint64_t>(A);
          ok = v <= std::numeric_limits<uint32_t>::max();
          const uint32_t w = static_cast<uint32_t>(v);
          if (ok) std::memcpy(where, &w, 4);
          break;
        }
        case R_X86_64_32S:
          ok = put32(static_cast<int64_t>(*S + static_cast<uint64_t>(A)));
          break;
        default:
          return refuse("relocation type " + std::to_string(type));
      }
      if (!ok) return refuse("relocation of type " + std::to_string(type) + " out of range");
    }
  }

  // The requested symbols: defined, global or weak, in a loaded section.
  ElfLoad out;
  for (const auto& want : symbols) {
    std::optional<uint64_t> found;
    for (size_t k = 1; k < nsym && !found; ++k) {
      const Elf64_Sym s = sym(k);
      const unsigned bind = ELF64_ST_BIND(s.st_info);
      if ((bind != STB_GLOBAL && bind != STB_WEAK) || s.st_shndx == SHN_UNDEF) continue;
      const char* name = f.str(strtab, s.st_name);
      if (!name || want != name) continue;
      found = address(static_cast<uint32_t>(k), &err);
      if (!found) return refuse(err);
    }
    if (!found) return refuse("no symbol " + want);
    out.addresses.push_back(reinterpret_cast<void*>(*found));
  }

  if (code_end > 0 && ::mprotect(base, code_end, PROT_READ | PROT_EXEC) != 0)
    return refuse("mprotect of the code failed");
  if (ro_end > code_end && ::mprotect(base + code_end, ro_end - code_end, PROT_READ) != 0)
    return refuse("mprotect of the constants failed");
  out.owner = std::shared_ptr<void>(map, map.get());
  return out;
}

}  // namespace codegen::cpu
