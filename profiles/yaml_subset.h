// A reader for the plain block-style YAML that memplan's data files (gpus.yaml, families.yaml)
// and most training configs are written in, several times faster than yaml-cpp, which
// parse_yaml() keeps for everything else. What it takes it reads into exactly the Nodes
// parse_yaml's yaml-cpp path makes (kinds, text, quoted, paths, line:col); anything outside the
// subset, and anything yaml-cpp would refuse or that a limit would stop, makes it decline, and
// yaml-cpp reads the file (with its errors at their positions). tests/profiles/yaml_subset_test.cpp
// holds the two to that on every YAML file in the repository and on mutations of them.
//
// The subset, line by line: blank and comment lines; `key: value` and `key:` (a nested block
// below it, or a list at the key's own indentation, or nothing: null); `- value` and `- key:
// value` (a mapping item whose other keys follow at its key's indentation). Keys are plain words
// or quoted; values are plain scalars (a comment after " #"), single- or double-quoted scalars
// on one line (the double-quoted escapes \" \\ \/ \n \t \r), and flow lists of such scalars on
// one line. Not in it (yaml-cpp reads them): tabs, carriage returns, a byte order mark, document
// markers and directives, anchors, aliases, tags, merge keys, block scalars (| >), flow mappings,
// nested flow lists, multi-line scalars, explicit keys (?), `- - x`, an empty list item, and a
// duplicate key.
#pragma once

#include <string>

#include "profiles/reader.h"

namespace memplan::profiles::detail {

// Reads `text` (the file `path`) into `out` and returns true, or returns false, leaving `out` as
// it was, where the text is not in the subset or would meet a limit of `lim`. REQUIRES: the text
// passed check_text_impl and prescan_yaml (parse_yaml does both first).
bool parse_yaml_subset(const std::string& text, const std::string& path, const ReadLimits& lim, Node& out);

}  // namespace memplan::profiles::detail
