// The translation unit that builds the tests' shared precompiled header (tests/CMakeLists.txt,
// DHTC_TEST_PCH); it has nothing of its own.
