// Checkpoints under concurrency and against hostile files (issue 37): threads saving to one path
// never tear it; a file truncated while it is read, a FIFO named like a checkpoint and a deeply
// nested safetensors header raise clear errors (each in the helper process checkpoint_child,
// watched with a timeout, so a crash or a hang fails the test instead of killing it); .npz
// members that share bytes are refused; nx::load_into's errors name nx::load_into.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "trace/rune.h"

namespace {

namespace fs = std::filesystem;
using nx::Tensor;

// A fresh directory per test.
class Dir {
 public:
  Dir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("rune-io-safety-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Dir() { fs::remove_all(path_); }
  std::string operator/(const std::string& n) const { return (path_ / n).string(); }
  std::string path() const { return path_.string(); }
  std::vector<std::string> files() const {
    std::vector<std::string> r;
    for (auto& e : fs::directory_iterator(path_)) r.push_back(e.path().filename().string());
    std::sort(r.begin(), r.end());
    return r;
  }

 private:
  fs::path path_;
};

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_file(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// How a run of checkpoint_child ended.
struct ChildEnd {
  bool timed_out = false;
  int exit_code = -1;  // -1: ended by a signal
  int signal = 0;
  long max_rss_kb = 0;  // the child's own peak (its vmhwm_kb line), else getrusage's
  double seconds = 0;
};

// Runs checkpoint_child with `args`, killing it after `timeout` seconds.
ChildEnd run_child(const std::vector<std::string>& args, double timeout) {
  std::vector<char*> argv{const_cast<char*>(CHECKPOINT_CHILD)};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  // The child's stdout comes back through a pipe (one short line at most: it never fills).
  int out[2];
  if (::pipe(out) != 0) return ChildEnd{};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    ::execv(CHECKPOINT_CHILD, argv.data());
    std::_Exit(127);
  }
  ::close(out[1]);
  ChildEnd end;
  int status = 0;
  rusage ru{};
  for (;;) {
    if (::wait4(pid, &status, WNOHANG, &ru) == pid) break;
    if (std::chrono::steady_clock::now() - t0 > std::chrono::duration<double>(timeout)) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &ru);
      end.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  end.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  end.max_rss_kb = ru.ru_maxrss;
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  // ru_maxrss also counts the forked copy of this process before the exec: the child's own
  // peak, where it printed one, is what the memory tests mean.
  if (auto at = text.find("vmhwm_kb="); at != std::string::npos)
    end.max_rss_kb = std::atol(text.c_str() + at + 9);
  if (WIFEXITED(status)) end.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
  return end;
}

std::string describe(const ChildEnd& e) {
  return e.timed_out ? "timed out (killed)"
         : e.signal  ? std::string("killed by signal ") + strsignal(e.signal)
                     : "exited with " + std::to_string(e.exit_code);
}

// ---- threads saving to one path ----

// Every writer thread saves its own contents to one path while reader threads load it: no save
// fails, every load sees one writer's complete file, and no temporary is left behind. (All
// writers shared one temporary name, path.tmp.<pid>: saves failed with "cannot rename" and loads
// saw files mixing two writers.)
TEST(Concurrent, ThreadsSavingToOnePathNeverTearIt) {
  for (const char* ext : {".safetensors", ".npz"}) {
    Dir dir;
    const std::string path = dir / (std::string("ck") + ext);
    constexpr int kWriters = 6, kSaves = 12, kReaders = 2;
    constexpr int64_t kN = 1 << 14;
    // Writer w's save i holds "a" and "b" filled with the value 1 + w * kSaves + i.
    std::vector<std::vector<Tensor>> values(kWriters);
    for (int w = 0; w < kWriters; ++w)
      for (int i = 0; i < kSaves; ++i)
        values[w].push_back(nx::full(nx::int32, {kN}, 1 + w * kSaves + i));
    nx::save(path,
             nx::TensorMap{{"a", nx::zeros(nx::int32, {kN})}, {"b", nx::zeros(nx::int32, {kN})}});
    std::atomic<int> save_failures{0}, load_failures{0}, torn{0}, loads{0}, writers_left{kWriters};
    std::vector<std::string> messages;
    std::mutex mu;
    auto note = [&](const std::string& m) {
      std::lock_guard lock(mu);
      if (messages.size() < 5) messages.push_back(m);
    };
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w)
      threads.emplace_back([&, w] {
        for (int i = 0; i < kSaves; ++i) {
          try {
            nx::save(path, nx::TensorMap{{"a", values[w][i]}, {"b", values[w][i]}});
          } catch (const std::exception& e) {
            ++save_failures;
            note(e.what());
          }
        }
        --writers_left;
      });
    for (int r = 0; r < kReaders; ++r)
      threads.emplace_back([&] {
        while (writers_left > 0) {
          try {
            nx::TensorMap m = nx::load(path);
            std::vector<int32_t> a = nx::to_vector<int32_t>(m.at("a"));
            std::vector<int32_t> b = nx::to_vector<int32_t>(m.at("b"));
            const bool one_writer =
                m.size() == 2 && a.size() == size_t{kN} &&
                std::all_of(a.begin(), a.end(), [&](int32_t v) { return v == a[0]; }) && a == b;
            if (!one_writer) ++torn;
            ++loads;
          } catch (const std::exception& e) {
            ++load_failures;
            note(e.what());
          }
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& m : messages) ADD_FAILURE() << ext << ": " << m;
    EXPECT_EQ(save_failures.load(), 0) << ext;
    EXPECT_EQ(load_failures.load(), 0) << ext;
    EXPECT_EQ(torn.load(), 0) << ext << ": loads that mixed two writers' files";
    EXPECT_GT(loads.load(), 0) << ext;
    EXPECT_EQ(dir.files(), std::vector<std::string>{std::string("ck") + ext}) << ext;
  }
}

// ---- files that crash or hang a reader: in the helper process ----

// A file rewritten in place (truncated, then written again, as np.save does) while nx::load_npy
// / nx::load read it: each load raises a clear error or returns the whole file, and the process
// never dies of SIGBUS (the file was mapped, and a mapped page past the new end faults).
TEST(Child, FileTruncatedWhileLoadingRaisesNeverCrashes) {
  Dir dir;
  for (const char* name : {"w.npy", "w.safetensors"}) {
    ChildEnd e = run_child({"truncate", dir / name, "1.5"}, 60);
    EXPECT_EQ(e.exit_code, 0) << name << ": " << describe(e);
  }
}

// A FIFO named like a checkpoint: nx::load, nx::load_npy and nx::load_into raise at once, naming
// it, instead of waiting forever for a writer.
TEST(Child, FifoNamedLikeACheckpointIsRefusedAtOnce) {
  Dir dir;
  ChildEnd e = run_child({"fifo", dir.path()}, 30);
  EXPECT_EQ(e.exit_code, 0) << describe(e);
  EXPECT_LT(e.seconds, 20);
}

// A 20 MB safetensors header nested 10^7 levels deep fails fast with a clear error and little
// memory (a JSON tree of it took 1.4 GB before its error): the child's peak resident memory stays
// within 100 MB of an idle child's.
TEST(Child, DeeplyNestedSafetensorsHeaderFailsFastInLittleMemory) {
  Dir dir;
  ChildEnd idle = run_child({"idle"}, 30);
  ASSERT_EQ(idle.exit_code, 0) << describe(idle);
  const size_t depth = 10'000'000;
  auto file = [](const std::string& json) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(uint64_t{json.size()} >> (8 * i));
    return s + json;
  };
  // Inside a tensor's entry, under a key rune does not read (such values are skipped).
  write_file(dir / "deep.safetensors",
             file(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0],"x":)" +
                  std::string(depth, '[') + std::string(depth, ']') + "}}"));
  // The whole header an array.
  write_file(dir / "array.safetensors", file(std::string(depth, '[') + std::string(depth, ']')));
  struct Case {
    const char* file;
    const char* message;
  };
  for (const Case& c :
       {Case{"deep.safetensors",
             "': header nests JSON more than 64 levels deep (a safetensors "
             "header has 3)"},
        Case{"array.safetensors", "': header is not a JSON object (it is an array)"}}) {
    ChildEnd e = run_child({"load", dir / c.file, c.message}, 60);
    EXPECT_EQ(e.exit_code, 0) << c.file << ": " << describe(e);
    EXPECT_LT(e.seconds, 10) << c.file;
    EXPECT_LT(e.max_rss_kb - idle.max_rss_kb, 100 * 1024)
        << c.file << ": peak RSS " << e.max_rss_kb << " kB, idle " << idle.max_rss_kb << " kB";
  }
}

// ---- .npz members that share bytes ----

uint32_t get32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}
uint32_t get16(const std::string& s, size_t at) {
  return static_cast<uint8_t>(s[at]) | (static_cast<uint8_t>(s[at + 1]) << 8);
}
void put32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}
void put16(std::string& s, size_t at, uint32_t v) {
  s[at] = static_cast<char>(v);
  s[at + 1] = static_cast<char>(v >> 8);
}

// An archive saved with one member "a.npy", its central directory entry repeated `copies` times
// under the names a.npy, b.npy, ... (every entry naming the one member's bytes), and its end
// record counting them.
std::string shared_member_archive(const std::string& one, int copies) {
  const size_t eocd = one.size() - 22;
  const size_t cd = get32(one, eocd + 16);
  const std::string entry = one.substr(cd, eocd - cd);
  std::string dir;
  for (int i = 0; i < copies; ++i) {
    std::string e = entry;
    const std::string name = "m" + std::to_string(i) + ".npy";
    e.replace(46, get16(entry, 28), name);
    put16(e, 28, static_cast<uint32_t>(name.size()));
    dir += e;
  }
  std::string end = one.substr(eocd);
  put16(end, 8, copies);
  put16(end, 10, copies);
  put32(end, 12, static_cast<uint32_t>(dir.size()));
  return one.substr(0, cd) + dir + end;
}

std::string load_error(const std::string& path) {
  try {
    nx::load(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "<loaded>";
}

// 1,500 directory entries naming one 1 MiB member loaded as 1.5 GB from a 1 MB file; Python's
// zipfile refuses such overlapping entries, and so does rune, before inflating or allocating.
TEST(Npz, MembersThatShareBytesAreRefused) {
  Dir dir;
  const std::string path = dir / "one.npz";
  nx::save(path, nx::TensorMap{{"a", nx::zeros(nx::uint8, {1 << 20})}});
  const std::string one = read_file(path);
  const std::string p = dir / "shared.npz";
  write_file(p, shared_member_archive(one, 1500));
  const size_t member_end = get32(one, one.size() - 22 + 16);  // the member ends where the
                                                               // directory begins
  EXPECT_EQ(load_error(p),
            "nx::load: '" + p + "': member 'm1.npy' at bytes [0, " + std::to_string(member_end) +
                ") overlaps member 'm0.npy' at bytes [0, " + std::to_string(member_end) +
                ") (each member's bytes must be its own)");
  // Two entries are enough; one is the archive as saved.
  write_file(p, shared_member_archive(one, 2));
  EXPECT_NE(load_error(p).find("member 'm1.npy' at bytes [0, "), std::string::npos);
  write_file(p, shared_member_archive(one, 1));
  EXPECT_EQ(nx::load(p).at("m0").shape(), (nx::Shape{1 << 20}));
  // A member whose data runs into the central directory (both sizes claim 8 bytes more).
  std::string into = one;
  const size_t cd = get32(one, one.size() - 22 + 16);
  for (size_t at : {size_t{18}, size_t{22}}) put32(into, at, get32(one, at) + 8);
  for (size_t at : {cd + 20, cd + 24}) put32(into, at, get32(one, at) + 8);
  write_file(p, into);
  EXPECT_EQ(load_error(p), "nx::load: '" + p + "': member 'a.npy' at bytes [0, " +
                               std::to_string(member_end + 8) +
                               ") runs into the central directory at byte " + std::to_string(cd));
}

// ---- nx::load_into names itself ----

struct Pair {
  Tensor w, b;
};

}  // namespace
RUNE_TREE(Pair, w, b)
namespace {

TEST(LoadInto, ErrorsNameLoadInto) {
  Dir dir;
  Pair tree{nx::zeros(nx::float32, {2}), nx::zeros(nx::float32, {3})};
  const std::string missing = dir / "missing.safetensors";
  try {
    nx::load_into(missing, tree);
    FAIL() << "loaded a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "nx::load_into: '" + missing + "': cannot open: No such file or directory");
  }
  const std::string corrupt = dir / "corrupt.npz";
  write_file(corrupt, std::string(40, 'x'));
  try {
    nx::load_into(corrupt, tree);
    FAIL() << "loaded a corrupt file";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "nx::load_into: '" + corrupt +
                                         "': is not a zip archive (no end of central directory "
                                         "record)");
  }
  const std::string npy = dir / "x.npy";
  try {
    nx::load_into(npy, tree);
    FAIL() << "loaded a .npy into a tree";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("nx::load_into: '" + npy + "': ", 0), 0u) << e.what();
  }
  // The tree is as it was.
  EXPECT_EQ(tree.w.shape(), (nx::Shape{2}));
  EXPECT_EQ(nx::to_vector<float>(tree.b), (std::vector<float>{0, 0, 0}));
}

}  // namespace
