// fmt's compiled part (vformat, vprint, the error reporting), built into memplan_fmt. Debian's
// libfmt-dev ships it only as libfmt.so, which needs libstdc++.so: loading and relocating the two
// took most of a short memplan run (--version: 1.6 ms against 1.0 ms without them, on the 2-core
// machine). The definitions are fmt's own (format-inl.h, the header fmt's header-only mode
// includes); what a build of fmt instantiates besides, only the two locale helpers memplan's
// formatting reaches are instantiated here (the linker names any other it needs).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
