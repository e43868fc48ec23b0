// The model's fields (fields.h): ModelSpec's members by name, each with its path and its kind.
#include <fmt/format.h>

#include <stdexcept>

#include "estimator/fields.h"

namespace memplan {
namespace {

template <class T>
ModelField row(const char* name, T ModelSpec::*member) {
  return {name, fmt::format("model.{}", name), model_offset(member), member};
}
// An enum by its words (families.yaml's).
template <class E>
ModelField row(const char* name, E ModelSpec::*member, std::vector<std::pair<const char*, E>> words) {
  NamedMember named;
  for (const auto& w : words) named.names.emplace_back(w.first);
  named.get = [member, words](const ModelSpec& m) {
    for (const auto& [word, value] : words)
      if (m.*member == value) return std::string(word);
    return std::string("?");
  };
  named.set = [member, words](ModelSpec& m, const std::string& v) {
    for (const auto& [word, value] : words)
      if (v == word) {
        m.*member = value;
        return true;
      }
    return false;
  };
  return {name, fmt::format("model.{}", name), model_offset(member), std::move(named)};
}

// An enum the setup JSON shows, by to_string's word ("layer-norm"; families.yaml's is "layer_norm").
template <class E>
ModelField shown_row(const char* name, E ModelSpec::*member, std::vector<std::pair<const char*, E>> words) {
  ModelField f = row(name, member, std::move(words));
  std::get<NamedMember>(f.member).shown = [member](const ModelSpec& m) { return std::string(to_string(m.*member)); };
  f.in_setup_json = true;
  return f;
}

// A row whose name is the member's own spelling, so the two cannot disagree.
#define MEMPLAN_MODEL(member, ...) row(#member, &ModelSpec::member, ##__VA_ARGS__)
#define MEMPLAN_MODEL_SHOWN(member, ...) shown_row(#member, &ModelSpec::member, ##__VA_ARGS__)

}  // namespace

ModelField ModelField::at(std::string p) && {
  path = std::move(p);
  return std::move(*this);
}

ModelField ModelField::shown() && {
  // An enum needs its to_string word: MEMPLAN_MODEL_SHOWN (model_fields() is built at the first
  // path() or families.yaml read, so every test run meets this).
  if (std::holds_alternative<NamedMember>(member))
    throw std::logic_error("model field " + name + ": an enum shown in the setup JSON is MEMPLAN_MODEL_SHOWN, not .shown()");
  in_setup_json = true;
  return std::move(*this);
}

const std::vector<ModelField>& model_fields() {
  static const std::vector<ModelField> t = {
      MEMPLAN_MODEL(name).shown(),
      MEMPLAN_MODEL(model_type).shown(),
      MEMPLAN_MODEL(hf_repo),
      MEMPLAN_MODEL(checkpoint_dtype),
      MEMPLAN_MODEL_SHOWN(head, {{"causal_lm", HeadKind::causal_lm}, {"masked_lm", HeadKind::masked_lm},
                          {"sequence_classification", HeadKind::sequence_classification}}),
      MEMPLAN_MODEL(hidden_size).shown(),
      MEMPLAN_MODEL(num_layers).shown(),
      MEMPLAN_MODEL(num_attention_heads).shown(),
      MEMPLAN_MODEL(num_key_value_heads).shown(),
      MEMPLAN_MODEL(head_dim).shown(),
      MEMPLAN_MODEL(intermediate_size).shown(),
      MEMPLAN_MODEL(vocab_size).shown(),
      MEMPLAN_MODEL(max_position_embeddings),
      MEMPLAN_MODEL(num_labels),
      MEMPLAN_MODEL(type_vocab_size),
      MEMPLAN_MODEL_SHOWN(norm, {{"layer_norm", NormKind::layer_norm}, {"rms_norm", NormKind::rms_norm}}),
      MEMPLAN_MODEL_SHOWN(activation, {{"gelu", Activation::gelu}, {"gelu_tanh", Activation::gelu_tanh},
                                {"gelu_new", Activation::gelu_new}, {"silu", Activation::silu},
                                {"relu", Activation::relu}}),
      MEMPLAN_MODEL(gated_mlp).shown(),
      MEMPLAN_MODEL_SHOWN(positions, {{"learned", PositionKind::learned}, {"rotary", PositionKind::rotary},
                               {"alibi", PositionKind::alibi}, {"none", PositionKind::none}}),
      MEMPLAN_MODEL(tie_word_embeddings).shown(),
      MEMPLAN_MODEL(qkv_bias),
      MEMPLAN_MODEL(o_bias),
      MEMPLAN_MODEL(mlp_bias),
      MEMPLAN_MODEL(norm_bias),
      MEMPLAN_MODEL(final_norm),
      MEMPLAN_MODEL(bert_style),
      MEMPLAN_MODEL(fused_qkv),
      MEMPLAN_MODEL(fused_gate_up),
      MEMPLAN_MODEL(parallel_residual),
      MEMPLAN_MODEL(rotary_fraction),
      MEMPLAN_MODEL(post_norms),
      MEMPLAN_MODEL(qk_norm, {{"none", QkNorm::none}, {"per_head", QkNorm::per_head}, {"full_width", QkNorm::full_width},
                             {"per_head_layer_norm", QkNorm::per_head_layer_norm}, {"l2", QkNorm::l2}}),
      MEMPLAN_MODEL(attn_softcap),
      MEMPLAN_MODEL(final_softcap),
      MEMPLAN_MODEL(scale_embeddings),
      MEMPLAN_MODEL(causal_mask, {{"additive", MaskKind::additive}, {"bool_buffer", MaskKind::bool_buffer},
                                 {"padding", MaskKind::padding}, {"bool_4d", MaskKind::bool_4d}}),
      MEMPLAN_MODEL(softmax_fp32),
      MEMPLAN_MODEL(attn_weights_held_by_layer),
      MEMPLAN_MODEL(parallel_shared_norm),
      MEMPLAN_MODEL(pre_norms),
      MEMPLAN_MODEL(norm_weight_fp32),
      MEMPLAN_MODEL(norm_fp32_manual),
      MEMPLAN_MODEL(rope_fp32),
      MEMPLAN_MODEL(lm_head_bias),
      MEMPLAN_MODEL(logit_scale),
      MEMPLAN_MODEL(residual_multiplier),
      MEMPLAN_MODEL(attention_sinks),
      MEMPLAN_MODEL(sliding_window),
      MEMPLAN_MODEL(global_attention_every),
      MEMPLAN_MODEL(q_lora_rank),
      MEMPLAN_MODEL(kv_lora_rank),
      MEMPLAN_MODEL(qk_rope_head_dim),
      MEMPLAN_MODEL(qk_nope_head_dim),
      MEMPLAN_MODEL(v_head_dim),
      MEMPLAN_MODEL(attention_dropout),
      MEMPLAN_MODEL(hidden_dropout),
      MEMPLAN_MODEL(embedding_dropout),
      MEMPLAN_MODEL(num_experts),
      MEMPLAN_MODEL(experts_per_token).at("model.num_experts_per_token"),  // validate()'s and the readers' name
      MEMPLAN_MODEL(moe_intermediate_size),
      MEMPLAN_MODEL(num_shared_experts),
      MEMPLAN_MODEL(shared_expert_intermediate_size),
      MEMPLAN_MODEL(shared_expert_gate),
      MEMPLAN_MODEL(norm_topk_prob),
      MEMPLAN_MODEL(capacity_factor),
      MEMPLAN_MODEL(moe_layer_frequency),
      MEMPLAN_MODEL(first_dense_layers),
      MEMPLAN_MODEL(router, {{"softmax_topk", RouterKind::softmax_topk}, {"topk_softmax", RouterKind::topk_softmax},
                            {"sigmoid", RouterKind::sigmoid}, {"topk_sigmoid", RouterKind::topk_sigmoid}}),
      MEMPLAN_MODEL(router_bias),
      MEMPLAN_MODEL(router_fp32),
      MEMPLAN_MODEL(routed_scaling_factor),
      MEMPLAN_MODEL(expert_groups),
      MEMPLAN_MODEL(topk_groups),
      MEMPLAN_MODEL(moe_impl, {{"loop", MoeImpl::loop}, {"all_experts", MoeImpl::all_experts}}),
      MEMPLAN_MODEL(moe_fp32_combine),
      MEMPLAN_MODEL(fused_expert_gate_up),
      MEMPLAN_MODEL(expert_bias),
      MEMPLAN_MODEL(clamped_swiglu),
      MEMPLAN_MODEL(stacked_experts_v5),
  };
  return t;
}

const ModelField& model_field_at(size_t offset) {
  for (const ModelField& f : model_fields())
    if (f.offset == offset) return f;
  throw std::logic_error(fmt::format("ModelSpec's member at offset {} has no row in model_fields()", offset));
}

}  // namespace memplan
