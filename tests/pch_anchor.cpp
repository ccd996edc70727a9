// The source of the precompiled-header targets in tests/CMakeLists.txt (rune_test_pch,
// rune_program_pch): it gives each a translation unit, so that the headers are precompiled with
// the flags of the targets that reuse them. It defines nothing.
