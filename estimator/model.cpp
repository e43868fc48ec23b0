// Parameter tensors and counts (see model.h). Shapes follow the HF modelling code of each
// family; golden totals in tests/estimator/model_test.cpp (GPT-2 124,439,808; Llama-2-7B
// 6,738,415,616; Mixtral-8x7B 46,702,792,704).
#include "estimator/model.h"

#include <algorithm>

namespace memplan {

const char* role_name(Role r) {
  switch (r) {
    case Role::q: return "q"; case Role::k: return "k"; case Role::v: return "v";
    case Role::qkv: return "qkv"; case Role::o: return "o"; case Role::gate: return "gate";
    case Role::up: return "up"; case Role::gate_up: return "gate_up"; case Role::down: return "down";
    case Role::fc_in: return "fc_in"; case Role::router: return "router";
    case Role::expert_gate: return "expert_gate"; case Role::expert_up: return "expert_up";
    case Role::expert_down: return "expert_down"; case Role::shared_gate: return "shared_gate";
    case Role::shared_up: return "shared_up"; case Role::shared_down: return "shared_down";
    case Role::shared_expert_gate: return "shared_expert_gate"; case Role::lm_head: return "lm_head";
    case Role::pooler: return "pooler"; case Role::classifier: return "classifier";
    case Role::mlm_transform: return "mlm_transform";
  }
  return "?";
}

const std::vector<std::string>& supported_model_types() {
  static const std::vector<std::string> types = {"gpt2",  "gpt_neox",  "llama", "mistral", "mixtral", "qwen2", "qwen2_moe",
                                                 "qwen3", "qwen3_moe", "gemma", "gemma2",  "phi3",    "bert"};
  return types;
}

std::optional<ModelSpec> family_defaults(const std::string& type) {
  const auto& known = supported_model_types();
  if (std::find(known.begin(), known.end(), type) == known.end()) return std::nullopt;
  ModelSpec m;  // ModelSpec's defaults: LayerNorm with bias, learned positions, biases, tied; Llama-lineage attention
  m.model_type = type;
  if (type == "gpt2") {
    m.activation = Activation::gelu_new;
    m.fused_qkv = true;  // c_attn (Conv1D)
    m.causal_mask = MaskKind::bool_buffer;
    m.softmax_fp32 = false;
    m.attn_weights_held_by_layer = false;
    m.attention_dropout = m.hidden_dropout = m.embedding_dropout = 0.1;
    m.max_position_embeddings = 1024;
  } else if (type == "gpt_neox") {
    m.positions = PositionKind::rotary;
    m.tie_word_embeddings = false;
    m.max_position_embeddings = 2048;
    m.fused_qkv = true;          // query_key_value
    m.parallel_residual = true;  // GPTNeoXConfig use_parallel_residual=True
    m.rotary_fraction = 0.25;    // GPTNeoXConfig rotary_pct=0.25
  } else if (type == "bert") {
    m.bert_style = true;
    m.final_norm = false;
    m.head = HeadKind::masked_lm;
    m.type_vocab_size = 2;
    m.attention_dropout = m.hidden_dropout = m.embedding_dropout = 0.1;
    m.max_position_embeddings = 512;
    m.causal_mask = MaskKind::padding;
    m.softmax_fp32 = false;
  } else {  // Llama-style decoders: RMSNorm, SwiGLU/GeGLU, rotary, no biases
    m.norm = NormKind::rms_norm;
    m.norm_bias = false;
    const bool gemma = type == "gemma" || type == "gemma2";
    m.activation = gemma ? Activation::gelu_tanh : Activation::silu;
    m.gated_mlp = true;
    m.positions = PositionKind::rotary;
    m.tie_word_embeddings = gemma;
    m.qkv_bias = type == "qwen2" || type == "qwen2_moe";
    m.o_bias = m.mlp_bias = false;
    m.norm_topk_prob = type == "mixtral";  // Qwen2-MoE and Qwen3-MoE configs default it to false
    m.shared_expert_gate = type == "qwen2_moe";
    m.max_position_embeddings = 2048;
    m.scale_embeddings = gemma;  // GemmaModel: inputs_embeds * normalizer (sqrt(h))
    if (type == "gemma2") {
      m.post_norms = true;       // post_attention_layernorm, post_feedforward_layernorm
      m.attn_softcap = 50.0;     // Gemma2Config attn_logit_softcapping
      m.final_softcap = 30.0;    // Gemma2Config final_logit_softcapping
    }
    if (type == "qwen3" || type == "qwen3_moe") m.qk_norm = QkNorm::per_head;
    if (type == "phi3") m.fused_qkv = m.fused_gate_up = true;  // qkv_proj, gate_up_proj
  }
  return m;
}

bool has_qk_norm(const ModelSpec& m) { return m.qk_norm != QkNorm::none; }

int64_t norms_per_layer(const ModelSpec& m) { return m.post_norms ? 4 : 2; }

int64_t layer_norm_params(const ModelSpec& m) {
  const int64_t per_norm = m.hidden_size * (m.norm == NormKind::layer_norm && m.norm_bias ? 2 : 1);
  int64_t n = norms_per_layer(m) * per_norm;
  if (has_qk_norm(m)) n += 2 * m.head_dim;  // q_norm, k_norm over the head dimension
  return n;
}

std::vector<Linear> layer_linears(const ModelSpec& m, bool moe) {
  const int64_t h = m.hidden_size, a = m.num_attention_heads, k = m.num_key_value_heads, d = m.head_dim;
  std::vector<Linear> out;
  if (m.fused_qkv) {
    out.push_back({Role::qkv, h, (a + 2 * k) * d, m.qkv_bias});   // (h, (a+2k)d)
  } else {
    out.push_back({Role::q, h, a * d, m.qkv_bias});                // (h, a*d)
    out.push_back({Role::k, h, k * d, m.qkv_bias});                // (h, k*d)
    out.push_back({Role::v, h, k * d, m.qkv_bias});                // (h, k*d)
  }
  out.push_back({Role::o, a * d, h, m.o_bias});                    // (a*d, h)
  if (!moe) {
    const int64_t f = m.intermediate_size;
    if (m.gated_mlp && m.fused_gate_up) {
      out.push_back({Role::gate_up, h, 2 * f, m.mlp_bias});        // (h, 2f)
    } else if (m.gated_mlp) {
      out.push_back({Role::gate, h, f, m.mlp_bias});               // (h, f)
      out.push_back({Role::up, h, f, m.mlp_bias});                 // (h, f)
    } else {
      out.push_back({Role::fc_in, h, f, m.mlp_bias});              // (h, f)
    }
    out.push_back({Role::down, f, h, m.mlp_bias});                 // (f, h)
    return out;
  }
  const int64_t E = m.num_experts, fe = m.expert_width();
  out.push_back({Role::router, h, E, false});                      // (h, E)
  out.push_back({Role::expert_gate, h, fe, false, E});             // E x (h, f_e)
  out.push_back({Role::expert_up, h, fe, false, E});               // E x (h, f_e)
  out.push_back({Role::expert_down, fe, h, false, E});             // E x (f_e, h)
  if (m.num_shared_experts > 0 || m.shared_expert_intermediate_size > 0) {
    const int64_t fs = m.shared_expert_intermediate_size > 0 ? m.shared_expert_intermediate_size
                                                             : m.num_shared_experts * fe;
    out.push_back({Role::shared_gate, h, fs, false});              // (h, f_s)
    out.push_back({Role::shared_up, h, fs, false});                // (h, f_s)
    out.push_back({Role::shared_down, fs, h, false});              // (f_s, h)
    if (m.shared_expert_gate) out.push_back({Role::shared_expert_gate, h, 1, false});  // (h, 1)
  }
  return out;
}

// --- fine-tuning decisions -------------------------------------------------------------------

bool layer_frozen(const TrainingSetup& s, int64_t layer) {
  return s.finetune.mode == FinetuneMode::full && layer < s.finetune.freeze_layers;
}

static bool role_matches(Role r, const std::string& t) {
  auto any = [&](std::initializer_list<const char*> names) {
    return std::any_of(names.begin(), names.end(), [&](const char* n) { return t == n; });
  };
  switch (r) {
    case Role::q: return any({"q", "q_proj", "query"});
    case Role::k: return any({"k", "k_proj", "key"});
    case Role::v: return any({"v", "v_proj", "value"});
    case Role::qkv: return any({"q", "k", "v", "qkv", "qkv_proj", "c_attn", "query_key_value", "q_proj", "v_proj"});
    case Role::o: return any({"o", "o_proj", "dense", "out_proj", "c_proj", "attn.c_proj"});
    case Role::gate: case Role::expert_gate: case Role::shared_gate: return any({"gate", "gate_proj", "w1"});
    case Role::up: case Role::expert_up: case Role::shared_up: return any({"up", "up_proj", "w3"});
    case Role::gate_up: return any({"gate", "up", "gate_up_proj"});
    case Role::down: case Role::expert_down: case Role::shared_down:
      return any({"down", "down_proj", "w2", "c_proj", "mlp.c_proj", "dense_4h_to_h"});
    case Role::fc_in: return any({"up", "fc_in", "c_fc", "fc1", "dense_h_to_4h", "intermediate"});
    default: return false;
  }
}

bool lora_on(const TrainingSetup& s, Role r) {
  if (s.finetune.mode == FinetuneMode::full) return false;
  switch (r) {
    case Role::router: case Role::shared_expert_gate: case Role::lm_head: case Role::pooler:
    case Role::classifier: case Role::mlm_transform:
      return false;
    default: break;
  }
  const auto& t = s.finetune.lora_targets;
  if (t.empty()) return r == Role::q || r == Role::v || r == Role::qkv;  // PEFT default: q and v
  for (const auto& name : t) {
    if (name == "all-linear" || name == "all_linear" || name == "all") return true;
    if (role_matches(r, name)) return true;
  }
  return false;
}

bool base_trainable(const TrainingSetup& s, Role, int64_t layer) {
  return s.finetune.mode == FinetuneMode::full && !layer_frozen(s, layer);
}
bool embeddings_trainable(const TrainingSetup& s) {
  return s.finetune.mode == FinetuneMode::full ? s.finetune.freeze_layers == 0 : s.finetune.train_embeddings;
}
bool head_trainable(const TrainingSetup& s) {
  if (s.finetune.mode == FinetuneMode::full) return true;
  if (s.model.head == HeadKind::sequence_classification) return true;  // PEFT SEQ_CLS trains the head
  return s.finetune.train_head || (s.model.tie_word_embeddings && s.finetune.train_embeddings);
}

double quantized_bits(const Finetune& f) {
  switch (f.base_quant) {
    // NF4: 4 bits + an fp32 absmax per 64-block (0.5 bit); double quant stores the absmax in
    // 8 bits plus an fp32 scale per 256 blocks: 4 + 8/64 + 32/(64*256) = 4.127 bits
    // (Dettmers et al. 2023, QLoRA §2 "Double Quantization").
    case BaseQuant::nf4: return f.double_quant ? 4.0 + 8.0 / 64 + 32.0 / (64 * 256) : 4.5;
    // LLM.int8(): int8 weights + an fp32 scale per output row (bitsandbytes Int8Params).
    case BaseQuant::int8: return 8.0;
    case BaseQuant::none: return 0;
  }
  return 0;
}

// --- the list -------------------------------------------------------------------------------

std::vector<ParamTensor> parameter_tensors(const TrainingSetup& s) {
  const ModelSpec& m = s.model;
  const int64_t h = m.hidden_size, V = m.vocab_size, L = m.num_layers;
  const bool lora = s.finetune.mode != FinetuneMode::full;
  const bool quant = lora && s.finetune.base_quant != BaseQuant::none;
  const bool emb_train = embeddings_trainable(s);
  std::vector<ParamTensor> t;
  auto add = [&](std::string name, int64_t elems, int64_t count, ParamGroup g, bool mm, bool trainable,
                 bool quantized = false, int64_t rows = 0, int64_t cols = 0) {
    if (elems > 0 && count > 0) t.push_back({std::move(name), elems, count, g, mm, trainable, quantized, rows, cols});
  };

  add("embed_tokens.weight", V * h, 1, ParamGroup::embedding, m.tie_word_embeddings, emb_train, false, V, h);  // (V, h)
  if (m.positions == PositionKind::learned)
    add("embed_positions.weight", m.max_position_embeddings * h, 1, ParamGroup::embedding, false, emb_train);
  if (m.type_vocab_size > 0)
    add("token_type_embeddings.weight", m.type_vocab_size * h, 1, ParamGroup::embedding, false, emb_train);
  if (m.bert_style) add("embeddings.LayerNorm", 2 * h, 1, ParamGroup::norm, false, emb_train);  // (h) x2

  // Layers are grouped by kind (dense/MoE) and by frozen-ness; count = layers of that group.
  struct Group { bool moe; bool frozen; int64_t layers; };
  std::vector<Group> groups;
  for (int64_t i = 0; i < L; ++i) {
    const bool moe = m.is_moe_layer(i), frozen = layer_frozen(s, i);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.moe == moe && g.frozen == frozen; });
    if (it == groups.end()) groups.push_back({moe, frozen, 1});
    else it->layers += 1;
  }
  for (const Group& g : groups) {
    const std::string pre = g.moe ? "layers.*(moe)." : "layers.*.";
    const bool base_train = !lora && !g.frozen;
    for (const Linear& lin : layer_linears(m, g.moe)) {
      const ParamGroup pg = lin.role == Role::router ? ParamGroup::router
                            : (lin.role == Role::expert_gate || lin.role == Role::expert_up || lin.role == Role::expert_down)
                                ? ParamGroup::experts
                            : (lin.role == Role::q || lin.role == Role::k || lin.role == Role::v ||
                               lin.role == Role::qkv || lin.role == Role::o)
                                ? ParamGroup::attention
                                : ParamGroup::mlp;
      const bool qz = quant && lin.role != Role::router && lin.role != Role::shared_expert_gate;
      add(pre + role_name(lin.role) + ".weight", lin.in * lin.out, lin.count * g.layers, pg, true, base_train, qz,
          lin.out, lin.in);
      if (lin.bias) add(pre + role_name(lin.role) + ".bias", lin.out, lin.count * g.layers, pg, false, base_train);
      if (lora_on(s, lin.role)) {
        const int64_t r = s.finetune.lora_rank;
        add(pre + role_name(lin.role) + ".lora_A", r * lin.in, lin.count * g.layers, ParamGroup::adapter, true, true,
            false, r, lin.in);  // (r, in)
        add(pre + role_name(lin.role) + ".lora_B", lin.out * r, lin.count * g.layers, ParamGroup::adapter, true, true,
            false, lin.out, r);  // (out, r)
      }
    }
    add(pre + "norms", layer_norm_params(m), g.layers, ParamGroup::norm, false, base_train);
  }
  if (m.final_norm) add("norm", h * (m.norm == NormKind::layer_norm && m.norm_bias ? 2 : 1), 1, ParamGroup::norm, false, !lora);

  const bool head_train = head_trainable(s);
  switch (m.head) {
    case HeadKind::causal_lm:
      if (!m.tie_word_embeddings) add("lm_head.weight", V * h, 1, ParamGroup::head, true, head_train, false, V, h);  // (V, h)
      break;
    case HeadKind::masked_lm:
      add("cls.transform.dense", h * h + h, 1, ParamGroup::head, true, head_train);   // (h, h) + h
      add("cls.transform.LayerNorm", 2 * h, 1, ParamGroup::head, false, head_train);  // (h) x2
      if (!m.tie_word_embeddings) add("cls.decoder.weight", V * h, 1, ParamGroup::head, true, head_train);
      add("cls.decoder.bias", V, 1, ParamGroup::head, false, head_train);             // (V)
      break;
    case HeadKind::sequence_classification:
      if (m.bert_style) add("pooler.dense", h * h + h, 1, ParamGroup::head, true, head_train);
      add("score.weight", h * m.num_labels, 1, ParamGroup::head, true, head_train);  // (h, num_labels)
      if (m.bert_style) add("score.bias", m.num_labels, 1, ParamGroup::head, false, head_train);
      break;
  }
  return t;
}

ParameterCounts count_parameters(const TrainingSetup& s) { return count_parameters(s, parameter_tensors(s)); }

ParameterCounts count_parameters(const TrainingSetup& s, const std::vector<ParamTensor>& tensors) {
  ParameterCounts c;
  const ModelSpec& m = s.model;
  for (const ParamTensor& p : tensors) {
    const int64_t n = p.total();
    c.total += n;
    if (p.trainable) {
      c.trainable += n;
      c.largest_trainable = std::max(c.largest_trainable, p.elements);
      c.trainable_tensors += p.count;
      if (p.matmul) c.trainable_matmul += n;
    } else {
      c.frozen += n;
    }
    if (p.quantized) c.quantized += n;
    if (p.group == ParamGroup::embedding) c.embedding += n;
    if (p.group == ParamGroup::adapter) c.adapter += n;
    if (p.matmul) c.matmul += n;
    // Active parameters: routed experts count K_top / E of their total.
    if (p.group == ParamGroup::experts && m.num_experts > 0)
      c.active_per_token += n / m.num_experts * m.experts_per_token;
    else if (p.group != ParamGroup::embedding)
      c.active_per_token += n;
  }
  // Active parameters are the ones a token multiplies (FLOPs): the embedding lookup is not, but
  // a tied embedding matrix serves as the LM head matmul, so it counts once. (Model cards that
  // quote "active" counts usually include the input embedding table too.)
  if (m.tie_word_embeddings && m.head != HeadKind::sequence_classification)
    c.active_per_token += m.vocab_size * m.hidden_size;
  return c;
}

int64_t count_model_parameters(const ModelSpec& m) {
  TrainingSetup s;
  s.model = m;
  return count_parameters(s).total;
}

}  // namespace memplan
