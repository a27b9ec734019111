int host_value() { return 42; }
int main() { return host_value() == 42 ? 0 : 1; }
