// The helper process of tests/io/test_checkpoint_safety.cpp: what could crash or hang a reader
// (a file truncated while it is read, a FIFO named like a checkpoint, a deeply nested header)
// runs here, so the test watches it from outside with a timeout and sees a signal as a signal.
// Exit status 0: every expectation held; otherwise stderr says which failed.
//   checkpoint_child truncate <path.npy|path.safetensors> <seconds>: a thread rewrites the file in
//     place (open with O_TRUNC, then write it again in 1 MiB pieces, as np.save does) while the
//     main thread loads it: each load raises a clear error or returns the complete file.
//   checkpoint_child fifo <dir>: nx::load, nx::load_npy and nx::load_into of FIFOs named
//     x.safetensors, x.npz and x.npy raise "is a FIFO, not a regular file" instead of waiting.
//   checkpoint_child load <path> <expected message part>: nx::load raises, naming that part.
//   checkpoint_child idle: nothing (the baseline of the memory a child takes).
// `load` and `idle` end by printing "vmhwm_kb=N" on stdout: the peak resident memory of this
// program since its exec (/proc/self/status VmHWM). The parent's getrusage counts the forked
// copy of itself before the exec too, so it measured the test's own memory, not the child's.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "trace/rune.h"

namespace {

int failed(const std::string& what) {
  std::fprintf(stderr, "checkpoint_child: FAIL: %s\n", what.c_str());
  return 1;
}

bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

int truncate_while_loading(const std::string& path, double seconds) {
  const bool npy = ends_with(path, ".npy");
  const std::string api = npy ? "nx::load_npy: '" + path + "': " : "nx::load: '" + path + "': ";
  // The complete file: one int32 tensor of 8 Mi elements, element i = i.
  const nx::Tensor want = nx::arange(nx::int32, 0, 8 << 20);
  if (npy)
    nx::save_npy(path, want);
  else
    nx::save(path, nx::TensorMap{{"w", want}});
  std::string bytes;
  {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return failed("cannot read back " + path);
    char buf[1 << 16];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) bytes.append(buf, n);
    std::fclose(f);
  }
  const std::vector<uint8_t> want_bits = nx::to_bytes(want);
  std::atomic<bool> stop{false};
  std::atomic<int> rewrites{0};
  std::thread writer([&] {
    while (!stop) {
      int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
      if (fd < 0) continue;
      for (size_t at = 0; at < bytes.size();) {
        ssize_t w = ::write(fd, bytes.data() + at, std::min<size_t>(1 << 20, bytes.size() - at));
        if (w <= 0) break;
        at += static_cast<size_t>(w);
      }
      ::close(fd);
      ++rewrites;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // loads of the whole file too
    }
  });
  int loaded = 0, raised = 0, bad = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    try {
      nx::Tensor got = npy ? nx::load_npy(path) : nx::load(path).at("w");
      if (nx::to_bytes(got) != want_bits) ++bad;
      ++loaded;
    } catch (const std::exception& e) {
      if (std::string(e.what()).rfind(api, 0) != 0) {
        stop = true;
        writer.join();
        return failed(std::string("an error not beginning with the API and file: ") + e.what());
      }
      ++raised;
    }
  }
  stop = true;
  writer.join();
  std::printf("%d loads complete, %d raised, %d rewrites\n", loaded, raised, rewrites.load());
  if (bad) return failed(std::to_string(bad) + " loads returned a tensor other than the file's");
  if (raised + loaded < 5) return failed("too few loads to mean anything");
  return 0;
}

// f() must raise std::invalid_argument whose message holds every part.
template <class F>
bool raises(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    for (const auto& p : parts)
      if (!std::strstr(e.what(), p.c_str())) {
        failed(std::string("message lacks '") + p + "': " + e.what());
        return false;
      }
    return true;
  } catch (const std::exception& e) {
    failed(std::string("raised something other than std::invalid_argument: ") + e.what());
    return false;
  }
  failed("returned");
  return false;
}

int fifos(const std::string& dir) {
  for (const char* n : {"x.safetensors", "x.npz", "x.npy"})
    if (::mkfifo((dir + "/" + n).c_str(), 0644) != 0) return failed("mkfifo " + dir + "/" + n);
  const std::string st = dir + "/x.safetensors", npz = dir + "/x.npz", npy = dir + "/x.npy";
  const std::string why = "': is a FIFO, not a regular file";
  nx::Tensor tree = nx::zeros(nx::float32, {2});  // a tree that is one tensor
  bool ok = raises([&] { nx::load(st); }, {"nx::load: '" + st + why}) &&
            raises([&] { nx::load(npz); }, {"nx::load: '" + npz + why}) &&
            raises([&] { nx::load_npy(npy); }, {"nx::load_npy: '" + npy + why}) &&
            raises([&] { nx::load_into(st, tree); }, {"nx::load_into: '" + st + why});
  // A directory is refused the same way.
  ok = ok && raises([&] { nx::load_npy(dir); }, {"nx::load_npy: '" + dir + "': is a directory"});
  return ok ? 0 : 1;
}

// Prints VmHWM (kB) from /proc/self/status; returns rc.
int with_peak_memory(int rc) {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long kb = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    std::fclose(f);
    std::printf("vmhwm_kb=%ld\n", kb);
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "truncate" && argc == 4) return truncate_while_loading(argv[2], std::atof(argv[3]));
  if (what == "fifo" && argc == 3) return fifos(argv[2]);
  if (what == "load" && argc == 4)
    return with_peak_memory(
        raises([&] { nx::load(argv[2]); }, {std::string("nx::load: '") + argv[2], argv[3]}) ? 0
                                                                                            : 1);
  if (what == "idle") return with_peak_memory(0);
  std::fprintf(stderr, "usage: checkpoint_child truncate|fifo|load|idle ...\n");
  return 2;
}
