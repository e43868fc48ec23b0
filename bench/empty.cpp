// An empty C++ program, linked as g++ links one by default: what starting a C++ process costs here,
// the yardstick of `memplan --version` in bench/startup.sh and bench/ratios.sh.
int main() { return 0; }
