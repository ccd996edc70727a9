// A fingerprint of everything LLVM's host detection reads on this machine, so that the code
// identity LLVM computes (cpu::target_id: LLVM version, triple, CPU name, features) can be
// remembered in the disk cache and found again by a later process without loading LLVM.
#pragma once
#include <string>

namespace codegen::cpu {

// LLVM (sys::getHostCPUName, sys::getHostCPUFeatures; x86-64) derives the CPU name and
// features from cpuid leaves 0, 1, 7 (subleaves 0 and 1), 0xd (subleaf 1), 0x14, 0x19,
// 0x80000000, 0x80000001 and 0x80000008, and from XCR0 (xgetbv: which register states the OS
// saves). The fingerprint holds all of those registers (leaf 1's per-core APIC id masked), the
// brand string, the LLVM version rune was built against and the identity (size, mtime, inode)
// of its libLLVM file: two processes with equal fingerprints get equal target ids from LLVM,
// and an upgraded libLLVM or another CPU gives another fingerprint. Empty where there is none
// (not x86-64): target_id then always asks LLVM.
std::string host_fingerprint();

}  // namespace codegen::cpu
