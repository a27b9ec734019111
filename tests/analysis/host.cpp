int host_value() { return 42; }
