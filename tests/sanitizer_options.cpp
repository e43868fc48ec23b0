// Linked into every executable of a sanitizer build (MEMPLAN_SANITIZE): any AddressSanitizer or
// UndefinedBehaviorSanitizer report aborts the process (SIGABRT), so no finding can pass as one
// of memplan's own exit codes (1 "does not fit" is ASan's default exit code) or go unnoticed in
// a test that expects a failure. $ASAN_OPTIONS / $UBSAN_OPTIONS still override these.
extern "C" const char* __asan_default_options() {
  return "abort_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:"
         "detect_invalid_pointer_pairs=1";
}
extern "C" const char* __ubsan_default_options() { return "halt_on_error=1:abort_on_error=1:print_stacktrace=1"; }
