// fmt's compiled part (vformat, vprint, the error reporting), built into memplan_fmt. Debian's
// libfmt-dev ships it only as libfmt.so, which needs libstdc++.so: loading and relocating the two
// took most of a short memplan run (--version: 1.6 ms against 1.0 ms without them, on the 2-core
// machine). The definitions are fmt's own (format-inl.h, the header fmt's header-only mode
// includes); the templates format.h declares `extern template` for a compiled fmt are instantiated
// here, as its declarations name them (fmt 9: the locale helpers; fmt 10 and 11 also vformat_to).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template FMT_API auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto thousands_sep_impl<wchar_t>(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;
#if FMT_VERSION >= 100000
template FMT_API void vformat_to(buffer<char>&, string_view, typename vformat_args<>::type, locale_ref);
#endif
}  // namespace detail
FMT_END_NAMESPACE
