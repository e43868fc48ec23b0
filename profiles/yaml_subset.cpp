// The block-style YAML subset reader (yaml_subset.h). It builds Nodes the way YamlBuilder
// (reader.cpp) builds them from yaml-cpp's events: a mapping's values carry their key's position
// and the key's dotted path, list items their own position and the list's path, the root the
// file's; every key, scalar, null and collection counts one value; a collection opened at
// max_depth collections deep is too deep. yaml-cpp's marks are the first character of a token (the
// quote of a quoted scalar, a mapping's first key), 0-based; Where is 1-based.
#include "profiles/yaml_subset.h"

#include <cctype>
#include <cstring>
#include <string_view>
#include <vector>

namespace memplan::profiles::detail {

namespace {

struct Decline {};  // outside the subset, or a limit reached: yaml-cpp reads the file

struct Line {
  int no = 0;        // 1-based
  int indent = 0;    // leading spaces (a list item's mapping: its first key's column - 1)
  size_t start = 0;  // where the line starts in the text
  size_t begin = 0;  // its content (after the indentation)
  size_t end = 0;    // the line's end (before '\n')
};

bool indicator(char c) { return std::strchr("-?:,[]{}#&*!|>'\"%@`", c) != nullptr && c != '\0'; }

// yaml-cpp's IsNullString: a plain scalar that is a null.
bool null_text(std::string_view s) { return s == "~" || s == "null" || s == "Null" || s == "NULL"; }

class Reader {
 public:
  Reader(const std::string& text, const std::string& path, const ReadLimits& lim) : t_(text), path_(path), lim_(lim) {}

  Node read() {
    split();
    if (lines_.empty()) {  // nothing but comments: no document
      Node empty;
      empty.where = Where::at_file(path_);
      return empty;
    }
    Node root = block(lines_[0].indent, "", Where::at_file(path_));
    if (cur_ != lines_.size()) throw Decline{};  // a line less indented than the root
    return root;
  }

 private:
  const std::string& t_;
  const std::string& path_;
  const ReadLimits& lim_;
  std::vector<Line> lines_;  // content lines only
  size_t cur_ = 0;
  int64_t values_ = 0;
  int depth_ = 0;  // collections open

  void split() {
    if (t_.compare(0, 3, "\xEF\xBB\xBF") == 0) throw Decline{};
    size_t pos = 0;
    int no = 0;
    while (pos < t_.size()) {
      size_t end = t_.find('\n', pos);
      if (end == std::string::npos) end = t_.size();
      ++no;
      size_t i = pos;
      while (i < end && t_[i] == ' ') ++i;
      for (size_t j = pos; j < end; ++j)
        if (t_[j] == '\t' || t_[j] == '\r' || t_[j] == '\0') throw Decline{};
      if (i < end && t_[i] != '#') {
        if (i == pos && (t_.compare(pos, 3, "---") == 0 || t_.compare(pos, 3, "...") == 0 || t_[pos] == '%')) throw Decline{};
        lines_.push_back({no, static_cast<int>(i - pos), pos, i, end});
      }
      pos = end + 1;
    }
  }

  Where at(const Line& l, size_t p) const { return Where::at_file(path_, l.no, static_cast<int>(p - l.start) + 1); }
  void count() {
    if (++values_ > lim_.max_yaml_values) throw Decline{};
  }
  // A collection opened (counted, and one level deeper until its caller closes it: --depth_).
  Node open(Node::Kind kind, const std::string& path, const Where& where) {
    if (depth_ >= lim_.max_depth) throw Decline{};
    ++depth_;
    count();
    Node n;
    n.kind = kind;
    n.path = path;
    n.where = where;
    return n;
  }
  static bool item(const std::string& t, const Line& l) {
    return t[l.begin] == '-' && (l.begin + 1 == l.end || t[l.begin + 1] == ' ');
  }
  size_t skip_spaces(size_t p, size_t end) const {
    while (p < end && t_[p] == ' ') ++p;
    return p;
  }
  // Only spaces, or a comment, from p to the line's end.
  bool rest_empty(size_t p, size_t end) const {
    p = skip_spaces(p, end);
    return p == end || (t_[p] == '#' && t_[p - 1] == ' ');
  }

  Node block(int indent, const std::string& path, const Where& where) {
    return item(t_, lines_[cur_]) ? list(indent, path, where) : map(indent, path, where);
  }

  // Where the key on line l (content at p) ends: the ':' followed by a space or the line's end;
  // npos when the line holds no key.
  size_t key_colon(const Line& l, size_t p) const {
    if (t_[p] == '"' || t_[p] == '\'') {
      size_t q = p;
      std::string ignored;
      q = quoted_end(l, p, ignored);
      return q < l.end && t_[q] == ':' && (q + 1 == l.end || t_[q + 1] == ' ') ? q : std::string::npos;
    }
    if (t_[p] == '[' || t_[p] == '{') return std::string::npos;
    for (size_t j = p; j < l.end; ++j) {
      if (t_[j] == '#' && j > p && t_[j - 1] == ' ') return std::string::npos;  // a comment first
      if (t_[j] == ':' && (j + 1 == l.end || t_[j + 1] == ' ')) return j;
    }
    return std::string::npos;
  }

  // A quoted scalar starting at p (its quote): its text into `out`; returns the position after
  // the closing quote. Declines where the scalar goes on past the line or uses other escapes.
  size_t quoted_end(const Line& l, size_t p, std::string& out) const {
    const char q = t_[p];
    out.clear();
    for (size_t j = p + 1; j < l.end; ++j) {
      const char c = t_[j];
      if (q == '\'') {
        if (c == '\'') {
          if (j + 1 < l.end && t_[j + 1] == '\'') {
            out += '\'';
            ++j;
            continue;
          }
          return j + 1;
        }
        out += c;
        continue;
      }
      if (c == '"') return j + 1;
      if (c == '\\') {
        if (j + 1 >= l.end) throw Decline{};
        switch (t_[++j]) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          default: throw Decline{};
        }
        continue;
      }
      out += c;
    }
    throw Decline{};  // not closed on this line
  }

  Node map(int indent, const std::string& path, const Where& where) {
    Node n = open(Node::Kind::map, path, where);
    while (cur_ < lines_.size() && lines_[cur_].indent == indent) {
      const Line l = lines_[cur_];
      if (item(t_, l)) throw Decline{};
      const size_t colon = key_colon(l, l.begin);
      if (colon == std::string::npos) throw Decline{};
      std::string key;
      if (t_[l.begin] == '"' || t_[l.begin] == '\'') {
        quoted_end(l, l.begin, key);
      } else {
        key.assign(t_, l.begin, colon - l.begin);
        if (key.empty() || indicator(key[0]) || key.back() == ' ' || key == "<<") throw Decline{};
        for (const char c : key)
          if (std::strchr("[]{},#&*!|>'\"%@`", c)) throw Decline{};
      }
      count();
      const Where kw = at(l, l.begin);
      for (const auto& e : n.entries)
        if (e.first == key) throw Decline{};  // duplicate: yaml-cpp's path names both lines
      const std::string child = child_path(path, key);
      const size_t v = skip_spaces(colon + 1, l.end);
      ++cur_;
      if (rest_empty(colon + 1, l.end)) {
        if (cur_ < lines_.size() && lines_[cur_].indent > indent) {
          n.entries.emplace_back(key, block(lines_[cur_].indent, child, kw));
        } else if (cur_ < lines_.size() && lines_[cur_].indent == indent && item(t_, lines_[cur_])) {
          n.entries.emplace_back(key, list(indent, child, kw));  // a list at the key's own indentation
        } else {
          Node null;
          null.path = child;
          null.where = kw;
          count();
          n.entries.emplace_back(key, std::move(null));
        }
      } else {
        n.entries.emplace_back(key, inline_value(l, v, child, kw, /*flow=*/false));
        if (cur_ < lines_.size() && lines_[cur_].indent > indent) throw Decline{};  // a continuation line
      }
    }
    if (cur_ < lines_.size() && lines_[cur_].indent > indent) throw Decline{};
    --depth_;
    return n;
  }

  Node list(int indent, const std::string& path, const Where& where) {
    Node n = open(Node::Kind::list, path, where);
    while (cur_ < lines_.size() && lines_[cur_].indent == indent && item(t_, lines_[cur_])) {
      Line& l = lines_[cur_];
      const size_t q = skip_spaces(l.begin + 1, l.end);
      if (q == l.begin + 1 && q < l.end) throw Decline{};
      if (rest_empty(l.begin + 1, l.end)) throw Decline{};                  // an empty item
      if (t_[q] == '-' && (q + 1 == l.end || t_[q + 1] == ' ')) throw Decline{};  // - - x
      const Where iw = at(l, q);
      if (key_colon(l, q) != std::string::npos) {
        // A mapping item: its keys at the first key's column, this line's rest the first of them.
        l.indent = static_cast<int>(q - l.start);
        l.begin = q;
        n.items.push_back(map(l.indent, path, iw));
      } else {
        ++cur_;
        n.items.push_back(inline_value(l, q, path, iw, /*flow=*/false));
        if (cur_ < lines_.size() && lines_[cur_].indent > indent) throw Decline{};
      }
    }
    --depth_;
    return n;
  }

  // A value on line l from p: a quoted or plain scalar (a null) or, outside a flow list, a flow
  // list of them.
  Node inline_value(const Line& l, size_t p, const std::string& path, const Where& where, bool flow) {
    Node n;
    n.path = path;
    n.where = where;
    const char c = t_[p];
    if (c == '"' || c == '\'') {
      const size_t after = quoted_end(l, p, n.text);
      if (!flow && !rest_empty(after, l.end)) throw Decline{};
      n.kind = Node::Kind::scalar;
      n.quoted = true;
      count();
      return n;
    }
    if (c == '[' && !flow) return flow_list(l, p, path, where);
    if (indicator(c) && !(c == '-' && p + 1 < l.end && t_[p + 1] != ' ' && !flow)) throw Decline{};
    // A plain scalar: to a comment or the line's end (in a flow list, to the next ',' or ']').
    size_t e = p;
    while (e < l.end) {
      const char d = t_[e];
      if (d == '#' && t_[e - 1] == ' ') break;
      if (d == ':' && (e + 1 == l.end || t_[e + 1] == ' ')) throw Decline{};  // a key where a value is
      if (flow && (d == ',' || d == ']')) break;
      // In a flow list yaml-cpp refuses more inside a plain scalar than YAML does ('?' among
      // them): only names, numbers and paths are taken.
      if (flow && !(std::isalnum(static_cast<unsigned char>(d)) || std::strchr("_.-+/ =$^~()<;", d))) throw Decline{};
      ++e;
    }
    while (e > p && t_[e - 1] == ' ') --e;
    if (e == p) throw Decline{};
    const std::string_view text(t_.data() + p, e - p);
    count();
    if (null_text(text)) return n;
    n.kind = Node::Kind::scalar;
    n.text.assign(text);
    return n;
  }

  Node flow_list(const Line& l, size_t p, const std::string& path, const Where& where) {
    Node n = open(Node::Kind::list, path, where);
    size_t j = skip_spaces(p + 1, l.end);
    if (j < l.end && t_[j] == ']') {
      ++j;
    } else {
      for (;;) {
        if (j >= l.end || t_[j] == ',' || t_[j] == ']') throw Decline{};  // an empty item, or not closed
        Node item = inline_value(l, j, path, at(l, j), /*flow=*/true);
        // Past the item: a quoted one ends at its quote, a plain one at ',' or ']'.
        if (t_[j] == '"' || t_[j] == '\'') {
          std::string ignored;
          j = quoted_end(l, j, ignored);
        } else {
          while (j < l.end && t_[j] != ',' && t_[j] != ']') ++j;
        }
        n.items.push_back(std::move(item));
        j = skip_spaces(j, l.end);
        if (j >= l.end) throw Decline{};
        if (t_[j] == ']') {
          ++j;
          break;
        }
        if (t_[j] != ',') throw Decline{};
        j = skip_spaces(j + 1, l.end);
      }
    }
    if (!rest_empty(j, l.end)) throw Decline{};
    --depth_;
    return n;
  }
};

}  // namespace

bool parse_yaml_subset(const std::string& text, const std::string& path, const ReadLimits& lim, Node& out) {
  try {
    Reader r(text, path, lim);
    out = r.read();
    return true;
  } catch (const Decline&) {
    return false;
  }
}

}  // namespace memplan::profiles::detail
