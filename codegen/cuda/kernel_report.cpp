#include "codegen/cuda/kernel_report.h"

#include <cstdio>
#include <regex>
#include <sstream>

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"

namespace codegen::cuda {

std::vector<FunctionResources> parse_ptxas_log(const std::string& log) {
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<FunctionResources> out;
  std::istringstream in(log);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, entry)) {
      out.push_back({m[1].str()});
      continue;
    }
    if (out.empty()) continue;
    FunctionResources& f = out.back();
    if (std::regex_search(line, m, frame)) {
      f.stack_bytes = std::stoll(m[1].str());
      f.spill_store_bytes = std::stoll(m[2].str());
      f.spill_load_bytes = std::stoll(m[3].str());
    }
    if (std::regex_search(line, m, used)) f.registers = std::stoi(m[1].str());
    if (std::regex_search(line, m, smem)) f.shared_bytes = std::stoll(m[1].str());
  }
  return out;
}

KernelReport report_kernel(const KernelSpec& k, const std::string& label, const std::string& arch) {
  const CDialect& d = cuda_dialect();
  KernelReport r;
  r.label = label;
  const DeviceDesc device = gpu_device_desc(runtime::DeviceKind::CUDA, arch);
  r.plan = c_plan(k, device);
  r.traffic = traffic(k, r.plan);
  std::string log;
  nvrtc_compile(render_c(k, "rk", d, device), arch, &log);
  r.functions = parse_ptxas_log(log);
  return r;
}

std::string format_report(const KernelReport& r) {
  std::string s;
  for (const auto& f : r.functions) {
    char buf[512];
    std::snprintf(
        buf, sizeof buf,
        "%s %s: plan %s; %d registers, %lld B stack, %lld B spill stores, %lld B spill "
        "loads, %lld B shared; %.3g FLOP, %.3g global bytes, %.2f FLOP per global byte\n",
        r.label.c_str(), f.name.c_str(), r.plan.str().c_str(), f.registers,
        static_cast<long long>(f.stack_bytes), static_cast<long long>(f.spill_store_bytes),
        static_cast<long long>(f.spill_load_bytes), static_cast<long long>(f.shared_bytes),
        r.traffic.flops, r.traffic.global_bytes, r.flops_per_byte());
    s += buf;
  }
  return s;
}

}  // namespace codegen::cuda
