#include "kernel.h"

#if RC_HOST_DEFINE != 1
#error "host_defines must reach cc dependents"
#endif
#if defined(RC_DEVICE_DEFINE) || defined(RC_LOCAL) || defined(RC_HOST_LOCAL)
#error "defines, local_defines and host_local_defines must not reach cc dependents"
#endif

int user_run() { return kernel_run(); }
