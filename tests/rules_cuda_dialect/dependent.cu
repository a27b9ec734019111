#include <thrust/version.h>

#include "kernel.h"

#if RC_HOST_DEFINE != 1 || RC_DEVICE_DEFINE != 3
#error "defines and host_defines must reach CUDA dependents"
#endif
#if defined(RC_LOCAL) || defined(RC_HOST_LOCAL)
#error "local_defines and host_local_defines must not reach dependents"
#endif

int dependent_run() { return THRUST_VERSION > 0 ? kernel_run() : 1; }
