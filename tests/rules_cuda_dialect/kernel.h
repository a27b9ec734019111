int kernel_run();
