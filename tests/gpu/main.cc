// Links the library's kernel and launches nothing.
#include <cstdio>

void* add_one_kernel();

int main() {
  std::printf("kernel at %p\n", add_one_kernel());
  return 0;
}
