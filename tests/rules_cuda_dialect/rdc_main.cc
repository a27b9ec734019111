int a_run();

int main() { return a_run(); }
