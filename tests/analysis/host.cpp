#include <cstdlib>
#include <cstring>
int host_value() { return 42; }
// Under `bazel test` the env attribute of cuda_test reaches the test.
int main() {
  const char* env = std::getenv("CUDA_SPLIT_TEST_ENV");
  if (std::getenv("TEST_TARGET") && (!env || std::strcmp(env, "1") != 0)) return 2;
  return host_value() == 42 ? 0 : 1;
}
