// Referenced by nothing: in a binary only through alwayslink.
__global__ void rc_registry_kernel(int* p) { *p = 1; }

extern "C" int rc_alwayslinked() { return 1; }
