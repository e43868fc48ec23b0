// Tool model names -> ModelSpec (tool_models.h).
#include "profiles/formats/tool_models.h"

#include <fmt/format.h>

namespace memplan::profiles::detail {

const ToolModel& find_tool_model(const std::vector<ToolModel>& table, const std::string& name, const char* what,
                                 const Where& where, const std::string& lister) {
  for (const ToolModel& row : table)
    if (name == row.name) return row;
  std::vector<std::string> names;
  for (const ToolModel& row : table) names.emplace_back(row.name);
  const std::vector<std::string> near = nearest(name, names);
  throw InputError(where, fmt::format("unknown {} '{}'", what, name),
                   near.empty() ? lister : fmt::format("did you mean '{}'? ({})", fmt::join(near, "' or '"), lister));
}

ModelSpec tool_model_spec(const ToolModel& row) {
  ReadModel m;
  if (row.preset[0] != '\0') {
    m = resolve_model(row.preset, Where{});
  } else {
    const std::string path = fmt::format("<{}>", row.name);
    m = read_hf_config(parse_json(row.config, path), path, row.name);
  }
  if (row.hf_repo[0] != '\0') m.spec.hf_repo = row.hf_repo;
  return m.spec;
}

void use_tool_model(ReadState& st, const ModelSpec& spec, const Node& n) {
  st.s().model = spec;
  st.out.has_model = true;
  Where w = n.where;
  w.key = n.path;
  set_model_origin(st.out.origin, w);
}

Checkpointing one_layer_in(int64_t k, int64_t layers) {
  Checkpointing c;
  if (k <= 1) {
    c.mode = CheckpointMode::full;
    return c;
  }
  if (layers <= 0 || layers % k == 0) {
    c.mode = CheckpointMode::every;
    c.every_k = k;
    return c;
  }
  c.mode = CheckpointMode::layers;
  for (int64_t i = k - 1; i < layers; i += k) c.layers.push_back(i);
  if (c.layers.empty()) c.mode = CheckpointMode::none;
  return c;
}

}  // namespace memplan::profiles::detail

namespace memplan::profiles {
std::optional<ToolModelRef> tool_model(const ModelSpec& m, const std::string& format) {
  if (format == "torchtune") return detail::torchtune_model_for(m);
  if (format == "litgpt") return detail::litgpt_model_for(m);
  return std::nullopt;
}
}  // namespace memplan::profiles
